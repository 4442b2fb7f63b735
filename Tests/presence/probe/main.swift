// Tests/presence: SecItem and LAContext calls made by a process the tests' polkit agent serves.
// Usage: keychain-presence-probe KEYCHAIN SCENARIO. It waits for one line on standard input first,
// so that the agent can register for its pid, then prints one line per call: "status N [data]".
import Foundation
import LocalAuthentication
import Security

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write("usage: keychain-presence-probe KEYCHAIN SCENARIO\n".data(using: .utf8)!)
    exit(2)
}
_ = readLine()
var keychain: SecKeychain?
guard SecKeychainOpen(arguments[1], &keychain) == errSecSuccess, let keychain else { print("cannot open"); exit(1) }

func query(_ account: String?, data: Bool = true, extra: [CFString: Any] = [:]) -> [CFString: Any] {
    var q: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrService: "presence", kSecUseKeychain: keychain]
    if let account { q[kSecAttrAccount] = account }
    if data { q[kSecReturnData] = true }
    for (k, v) in extra { q[k] = v }
    return q
}

func read(_ q: [CFString: Any]) {
    var result: CFTypeRef?
    let status = SecItemCopyMatching(q as CFDictionary, &result)
    switch result {
    case let data as Data: print("status \(status) \(String(decoding: data, as: UTF8.self))")
    case let list as [[String: Any]]:
        print("status \(status) " + list.compactMap { $0[kSecAttrAccount as String] as? String }.sorted().joined(separator: ","))
    case let attributes as [String: Any]: print("status \(status) \(attributes[kSecAttrAccount as String] ?? "")")
    default: print("status \(status)")
    }
}

switch arguments[2] {
case "add":
    // One item that asks for the user, one that does not.
    let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)!
    print(
        "status \(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrService: "presence", kSecAttrAccount: "guarded", kSecUseKeychain: keychain, kSecAttrAccessControl: access, kSecValueData: Data("guarded-secret".utf8)] as CFDictionary, nil))"
    )
    print(
        "status \(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrService: "presence", kSecAttrAccount: "open", kSecUseKeychain: keychain, kSecValueData: Data("open-secret".utf8)] as CFDictionary, nil))"
    )
case "read":
    read(query("guarded", extra: [kSecUseOperationPrompt: "Read the guarded test secret"]))
case "read-fail":
    read(query("guarded", extra: [kSecUseAuthenticationUI: kSecUseAuthenticationUIFail]))
case "read-skip":
    read(query(nil, extra: [kSecUseAuthenticationUI: kSecUseAuthenticationUISkip, kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll]))
case "attributes":
    read(query(nil, data: false, extra: [kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll]))
case "context-reuse":
    // No evaluation first: the first read asks, the second goes on within the reuse duration.
    let context = LAContext()
    context.touchIDAuthenticationAllowableReuseDuration = 60
    read(query("guarded", extra: [kSecUseAuthenticationContext: context]))
    read(query("guarded", extra: [kSecUseAuthenticationContext: context]))
    context.invalidate()
    read(query("guarded", extra: [kSecUseAuthenticationContext: context]))
case "context-evaluated":
    let context = LAContext()
    var error: NSError?
    print("can \(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))")
    let done = DispatchSemaphore(value: 0)
    context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Test: evaluate") { ok, error in
        print("evaluated \(ok) \((error as? LAError)?.code.rawValue ?? 0)")
        done.signal()
    }
    done.wait()
    read(query("guarded", extra: [kSecUseAuthenticationContext: context]))
case "delete":
    print("status \(SecItemDelete(query("guarded", data: false) as CFDictionary))")
case "biometry":
    var error: NSError?
    print("can \(LAContext().canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error)) \(error?.code ?? 0)")
    let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .biometryCurrentSet, nil)!
    print(
        "status \(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrService: "presence", kSecAttrAccount: "finger", kSecUseKeychain: keychain, kSecAttrAccessControl: access, kSecValueData: Data("x".utf8)] as CFDictionary, nil))"
    )
default:
    print("unknown scenario")
    exit(2)
}
