import KeychainCore

/// Stands in for polkit: answers as told and counts the requests.
final class ScriptedAuthorizer: PresenceAuthorizer, @unchecked Sendable {
    var answer = PresenceAnswer.granted
    var fingers = false
    /// What unavailability() and biometryUnavailability() answer.
    var missing: String?
    var biometryMissing: String?
    private(set) var reasons: [String?] = []
    var asked: Int { reasons.count }

    func authorize(reason: String?) -> PresenceAnswer {
        reasons.append(reason)
        return answer
    }

    func fingersEnrolled() -> Bool { fingers }
    func unavailability() -> String? { missing }
    func biometryUnavailability() -> String? { biometryMissing }
}
