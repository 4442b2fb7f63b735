// Tests/access: a SecItem program, as an application reads and stores its own password. The
// suite runs it from the trusted folder and, copied into the user's home, as the attacker's copy.
// Usage: keychain-access-probe KEYCHAIN add SERVICE ACCOUNT SECRET | read SERVICE ACCOUNT |
//        read-twice SERVICE ACCOUNT
// Prints "status N" and, for a read that succeeds, " SECRET". read-twice prints its pid, reads,
// waits for a line on standard input (an application that keeps running), and reads again.
import Foundation
import Security

let arguments = CommandLine.arguments
guard arguments.count >= 5 else {
    FileHandle.standardError.write("usage: keychain-access-probe KEYCHAIN add|read|read-twice SERVICE ACCOUNT [SECRET]\n".data(using: .utf8)!)
    exit(2)
}
var keychain: SecKeychain?
guard SecKeychainOpen(arguments[1], &keychain) == errSecSuccess, let keychain else {
    print("cannot open")
    exit(1)
}
let item: [CFString: Any] = [
    kSecClass: kSecClassGenericPassword, kSecAttrService: arguments[3], kSecAttrAccount: arguments[4], kSecUseKeychain: keychain
]

func read() {
    var query = item
    query[kSecReturnData] = true
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    if let data = result as? Data {
        print("status \(status) \(String(decoding: data, as: UTF8.self))")
    } else {
        print("status \(status)")
    }
    fflush(stdout)
}

switch arguments[2] {
case "add" where arguments.count == 6:
    var query = item
    query[kSecValueData] = Data(arguments[5].utf8)
    print("status \(SecItemAdd(query as CFDictionary, nil))")
case "read":
    read()
case "read-twice":
    print("pid \(getpid())")
    read()
    _ = readLine()
    read()
default:
    exit(2)
}
