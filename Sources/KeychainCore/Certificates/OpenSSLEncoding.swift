internal import COpenSSL
import Glibc

/// Small conversions between OpenSSL's objects and bytes, shared by the certificate, key and
/// PKCS#12 readers.
enum OpenSSLEncoding {
    /// Runs an i2d_* function twice, as OpenSSL intends: once for the length, once to write.
    static func der<T>(of object: T?, _ encode: (T?, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32) throws -> Bytes {
        let length = encode(object, nil)
        guard length > 0 else {
            OpenSSLErrors.clear()
            throw KeychainError(.decode, "cannot encode a part of the data")
        }
        var out = Bytes(repeating: 0, count: Int(length))
        let written = out.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return encode(object, &cursor)
        }
        guard written == length else { throw KeychainError(.decode, "cannot encode a part of the data") }
        return out
    }

    /// The contents of one DER element: what follows its tag and length.
    static func contents(ofDER der: Bytes) throws -> Bytes {
        guard der.count >= 2 else { throw KeychainError(.decode, "truncated DER") }
        let first = Int(der[1])
        if first < 0x80 { return Array(der.dropFirst(2)) }
        let lengthBytes = first & 0x7f
        guard lengthBytes >= 1, lengthBytes <= 4, der.count >= 2 + lengthBytes else { throw KeychainError(.decode, "bad DER length") }
        return Array(der.dropFirst(2 + lengthBytes))
    }

    /// An ASN1_STRING's (or OCTET/BIT STRING's) bytes.
    static func bytes(of string: UnsafePointer<ASN1_STRING>) -> Bytes {
        let count = Int(ASN1_STRING_length(string))
        guard count > 0, let data = ASN1_STRING_get0_data(string) else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: count))
    }

    static func bytes(of string: UnsafeMutablePointer<ASN1_STRING>) -> Bytes { bytes(of: UnsafePointer(string)) }

    /// An ASN1 string of any type (PrintableString, BMPString, ...) as UTF-8 text.
    static func utf8(_ string: UnsafeMutablePointer<ASN1_STRING>?) -> String? {
        guard let string else { return nil }
        var out: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&out, string)
        guard length >= 0, let out else {
            OpenSSLErrors.clear()
            return nil
        }
        defer { CRYPTO_free(out, #fileID, #line) }
        return String(decoding: UnsafeBufferPointer(start: out, count: Int(length)), as: UTF8.self)
    }

    /// An ASN1_TIME as seconds since 1970 (UTC).
    static func seconds(_ time: UnsafePointer<ASN1_TIME>?) -> Double? {
        guard let time else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        return Double(timegm(&parts))
    }

    /// A DER Name, parsed for comparison; nil when the bytes are not one.
    static func name(_ der: Bytes) -> OpaquePointer? {
        der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let name = d2i_X509_NAME(nil, &cursor, buffer.count)
            if name == nil { OpenSSLErrors.clear() }
            return name
        }
    }

    /// A read-only memory BIO over `bytes`, for the duration of `body`.
    static func withBIO<R>(_ bytes: Bytes, _ body: (OpaquePointer) throws -> R) throws -> R {
        try bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { throw KeychainError(.allocate) }
            defer { BIO_free(bio) }
            return try body(bio)
        }
    }
}

/// OpenSSL queues an error per failed call; a long-lived process must drain it, and a failure
/// the engine reports by its own code needs nothing from it.
enum OpenSSLErrors {
    static func clear() { ERR_clear_error() }
}
