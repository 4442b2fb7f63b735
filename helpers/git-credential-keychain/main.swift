import CredentialHelperSupport
import Glibc
import KeychainBroker
import KeychainCore
import KeychainPresence

// git-credential-keychain get|store|erase: git's credentials in the user's login keychain.
// Prints nothing when nothing matches, and nothing on stderr when all is well.

ProcessHardening.becomeUndumpable()
// An item that asks for the user asks through polkit, as it always has.
PresenceSetup.installPolkit()
// Where keychain-broker keeps the keys; a question goes to git's or docker's terminal.
BrokerSetup.installIntroduced(answerer: AccessAnswerers.standard())

guard let action = HelperArguments.action, action == "get" || action == "store" || action == "erase" else {
    HelperKeychain.printError("usage: git-credential-keychain get|store|erase  (set credential.helper=keychain)")
    exit(HelperArguments.count == 2 ? 0 : 1)  // git may call future actions; ignoring them is the protocol's rule
}

let request: CredentialMessage
do {
    request = try CredentialMessage.readStandardInput()
} catch let error as BoundedInput.TooLarge {
    // Exit 0 as for every other error: git reads a helper's answer, not its status.
    HelperKeychain.printError("\(GitCredentialHelper.name): \(error.message)")
    exit(0)
}
let helper = GitCredentialHelper(request: request)
do {
    let store = try HelperKeychain.open()
    switch action {
    case "get": try helper.get(store)
    case "store": try helper.store(store)
    default: try helper.erase(store)
    }
} catch let error as KeychainError where action == "get" && (error.code == .noSuchKeychain || error.code == .notAvailable) {
    // No keychain yet: git simply asks the user, as with an empty store.
} catch {
    HelperKeychain.printError(HelperKeychain.explain(error, helper: GitCredentialHelper.name))
}
exit(0)
