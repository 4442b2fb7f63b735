import Glibc
import XCTest

/// A scratch folder, and environment variables set for one test and put back after it.
class EnvironmentTestCase: XCTestCase {
    private(set) var folder = ""
    private var saved: [String: String?] = [:]

    override func setUpWithError() throws {
        var template = Array("/tmp/provider-switch-XXXXXX".utf8CString)
        folder = String(cString: try XCTUnwrap(mkdtemp(&template)))
    }

    override func tearDown() {
        for (name, value) in saved {
            if let value { setenv(name, value, 1) } else { unsetenv(name) }
        }
        saved = [:]
        _ = Glibc.system("rm -rf '\(folder)'")
    }

    func set(_ name: String, _ value: String?) {
        if saved.index(forKey: name) == nil { saved[name] = getenv(name).map { String(cString: $0) } }
        if let value { setenv(name, value, 1) } else { unsetenv(name) }
    }

    func write(_ path: String, _ text: String) {
        let file = fopen(path, "w")
        fputs(text, file)
        fclose(file)
    }
}
