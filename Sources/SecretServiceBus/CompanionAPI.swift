/// Another API the service answers on its own connection and in its own loop (KWallet's, with
/// `--kwallet`): its names are taken before the Secret Service's, and it hears what the loop notices.
package protocol CompanionAPI: AnyObject {
    /// The bus names it answers.
    var busNames: [String] { get }
    /// A keychain may have been locked behind the service's back.
    func noticeLocks()
    /// A connection left the bus.
    func connectionLeft(_ name: String)
}
