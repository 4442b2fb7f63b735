@testable import KeychainCore
import Glibc
import XCTest

/// Without $HOME the engine reads the user's home from passwd(5) itself: getpwuid in the
/// statically linked tools would need glibc's NSS modules of the very version they were built with.
final class HomeDirectoryTests: XCTestCase {
    func testHomeComesFromTheLineOfTheUID() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let path = scratch.directory + "/passwd"
        let text = """
            root:x:0:0:root:/root:/bin/bash
            broken line
            nohome:x:1001:1001::relative:/bin/sh
            alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash

            """
        let file = try XCTUnwrap(fopen(path, "w"))
        fputs(text, file)
        fclose(file)
        XCTAssertEqual(KeychainFile.passwdHome(uid: 1000, passwd: path), "/home/alice")
        XCTAssertEqual(KeychainFile.passwdHome(uid: 0, passwd: path), "/root")
        XCTAssertNil(KeychainFile.passwdHome(uid: 1001, passwd: path), "a home that is not absolute is not used")
        XCTAssertNil(KeychainFile.passwdHome(uid: 4242, passwd: path))
        XCTAssertNil(KeychainFile.passwdHome(uid: 0, passwd: path + "-missing"))
    }

    func testTheRealPasswdKnowsThisUser() {
        // The machine's own file; every user these tests run as is a local one.
        XCTAssertNotNil(KeychainFile.passwdHome(uid: geteuid()))
    }
}
