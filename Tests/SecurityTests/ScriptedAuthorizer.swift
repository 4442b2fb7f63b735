import KeychainCore

/// Stands in for polkit: answers as told and counts the requests.
final class ScriptedAuthorizer: PresenceAuthorizer, @unchecked Sendable {
    var answer = PresenceAnswer.granted
    var fingers = false
    private(set) var reasons: [String?] = []
    var asked: Int { reasons.count }

    func authorize(reason: String?) -> PresenceAnswer {
        reasons.append(reason)
        return answer
    }

    func fingersEnrolled() -> Bool { fingers }
}
