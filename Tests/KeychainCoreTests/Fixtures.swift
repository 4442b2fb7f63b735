@testable import KeychainCore
@_exported import KeychainTestSupport
import Glibc
import XCTest
