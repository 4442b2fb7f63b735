internal import COpenSSL

/// PEM armour ("-----BEGIN CERTIFICATE-----" and base64), read and written by OpenSSL's codec.
package enum PEM {
    package struct Block: Sendable {
        package var label: String
        package var der: Bytes
    }

    /// Every block in `text`, in order; nothing when `text` holds none.
    package static func blocks(in text: Bytes) -> [Block] {
        guard text.count < 64 << 20, looksLikePEM(text) else { return [] }
        defer { OpenSSLErrors.clear() }
        return
            (try? OpenSSLEncoding.withBIO(text) { bio -> [Block] in
                var out: [Block] = []
                while true {
                    var name: UnsafeMutablePointer<CChar>?
                    var header: UnsafeMutablePointer<CChar>?
                    var data: UnsafeMutablePointer<UInt8>?
                    var length = 0
                    guard PEM_read_bio(bio, &name, &header, &data, &length) == 1 else { break }
                    defer {
                        CRYPTO_free(name, #fileID, #line)
                        CRYPTO_free(header, #fileID, #line)
                        if let data { OPENSSL_cleanse(data, length) }
                        CRYPTO_free(data, #fileID, #line)
                    }
                    guard let name, let data else { continue }
                    out.append(Block(label: String(cString: name), der: Array(UnsafeBufferPointer(start: data, count: length))))
                }
                return out
            }) ?? []
    }

    static func firstBlock(in text: Bytes) -> Block? { blocks(in: text).first }

    /// Base64 in 64-column lines between BEGIN and END lines, as `openssl` writes it (OpenSSH
    /// writes its private key files in 70 columns).
    package static func encode(_ der: Bytes, label: String, columns: Int = 64) -> String {
        var lines = ["-----BEGIN \(label)-----"]
        let encoded = base64(der)
        var index = encoded.startIndex
        while index < encoded.endIndex {
            let end = encoded.index(index, offsetBy: columns, limitedBy: encoded.endIndex) ?? encoded.endIndex
            lines.append(String(encoded[index..<end]))
            index = end
        }
        lines.append("-----END \(label)-----")
        return lines.joined(separator: "\n") + "\n"
    }

    package static func base64(_ bytes: Bytes) -> String {
        var out = Bytes(repeating: 0, count: (bytes.count + 2) / 3 * 4 + 1)
        let written = EVP_EncodeBlock(&out, bytes, Int32(bytes.count))
        return String(decoding: out[0..<Int(max(0, written))], as: UTF8.self)
    }

    /// Padded base64 to its bytes; nil when the text is not base64.
    package static func base64(decoding text: Bytes) -> Bytes? {
        guard text.count % 4 == 0, text.count < 64 << 20 else { return nil }
        var decoded = Bytes(repeating: 0, count: text.count / 4 * 3)
        let count = EVP_DecodeBlock(&decoded, text, Int32(text.count))
        guard count >= 0 else { return nil }
        // EVP_DecodeBlock counts the bytes the padding stands for too.
        decoded.removeLast(text.reversed().prefix { $0 == UInt8(ascii: "=") }.count)
        return decoded
    }

    private static func looksLikePEM(_ text: Bytes) -> Bool {
        let marker = Array("-----BEGIN ".utf8)
        guard text.count >= marker.count else { return false }
        for start in 0...(text.count - marker.count) where text[start] == 0x2d {
            if Array(text[start..<start + marker.count]) == marker { return true }
        }
        return false
    }
}
