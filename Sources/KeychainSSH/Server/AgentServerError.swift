/// Why the agent's socket could not be made or served, as one line for the person or the journal.
package struct AgentServerError: Error, CustomStringConvertible, Equatable {
    package let description: String

    package init(_ description: String) { self.description = description }
}
