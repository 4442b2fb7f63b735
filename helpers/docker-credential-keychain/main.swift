import CredentialHelperSupport
import Glibc
import KeychainBroker
import KeychainCore
import KeychainPresence

// docker-credential-keychain store|get|erase|list|version: registry logins in the user's login
// keychain. Errors go to stdout with exit status 1, in docker-credential-helpers' words.

ProcessHardening.becomeUndumpable()
// An item that asks for the user asks through polkit, as it always has.
PresenceSetup.installPolkit()
// Where keychain-broker keeps the keys; a question goes to git's or docker's terminal.
BrokerSetup.installIntroduced(answerer: AccessAnswerers.standard())

let usage = "Usage: \(DockerCredentialHelper.name) <store|get|erase|list|version>"

func finish(_ output: String, status: Int32) -> Never {
    fputs(output, stdout)
    exit(status)
}

func readStandardInput() throws -> Bytes { try BoundedInput.read() }

guard let action = HelperArguments.action else { finish(usage + "\n", status: 1) }

let helper = DockerCredentialHelper(store: { try HelperKeychain.open() })
do {
    switch action {
    case "store": try helper.store(readStandardInput())
    case "get": finish(try helper.get(readStandardInput()), status: 0)
    case "erase": try helper.erase(readStandardInput())
    case "list": finish(try helper.list(), status: 0)
    case "version", "--version", "-v": finish("\(DockerCredentialHelper.name) (keychain-for-linux) 0.1.0\n", status: 0)
    case "--help", "-h": finish(usage + "\n", status: 0)
    default: finish("Unknown credential action `\(action)`\n", status: 1)
    }
} catch let tooLarge as BoundedInput.TooLarge {
    finish(tooLarge.message + "\n", status: 1)
} catch let failure as DockerCredentialHelper.Failure {
    finish(failure.message + "\n", status: 1)
} catch {
    finish(HelperKeychain.explain(error, helper: DockerCredentialHelper.name) + "\n", status: 1)
}
exit(0)
