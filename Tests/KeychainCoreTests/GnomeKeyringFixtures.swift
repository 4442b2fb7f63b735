/// Keyring files written by a real gnome-keyring-daemon 42.1 (Debian 12's gnome-keyring 42.1-1+b2),
/// through its own Secret Service: collections made with its CreateWithMasterPassword call, items
/// stored with python3-secretstorage 3.3.3 (a Chromium Safe Storage key, git's libsecret
/// attributes, a non-UTF-8 secret under a label with leading spaces and a newline, an empty
/// item). The encrypted one's password is "fixture-pw"; the plain-text one is what gnome-keyring
/// writes for an empty password. Data, not code: the reader is checked against them.
enum GnomeKeyringFixtures {
    static let encryptedPassword = "fixture-pw"

    static let encrypted: [UInt8] = hex(
        [
            "476e6f6d654b657972696e670a0d000a0000000000000007466978747572650000000000000000000000006b05ffae00000000000000000000057661",
            "dccc80df6dfaa100000000000000000000000000000000000000040000000200000000000000040000000870726f746f636f6c000000000000002035",
            "653035366335303061316334623661373131306235306438303762616465350000000673657276657200000000000000206135306466373739633630",
            "336363383836646232306331653164333833636333000000047573657200000000000000203765306437663861356439366332346666636338343066",
            "3331626365373262320000000a7864673a736368656d6100000000000000206163363435613934333430373936376465323837303236303537646535",
            "303938000000030000000000000002000000036170700000000000000020633131313162643531326232396538323162313230623836343436303236",
            "6238000000036b3d76000000000000002035393035633935336438393037356536306232386235313138363965376561310000000100000000000000",
            "020000000b6170706c69636174696f6e000000000000002063646332323866393463653461343563313365656333646164373661653035640000000a",
            "7864673a736368656d610000000000000020623635336430313766653466643237306437363539393431633763323839646200000004000000000000",
            "000000000230eaacb553c154423dfae4904a5a8921ed38a86a9d61138452c31eb8efd4df2330f4907018b99af8c61b2460952dd561662c79227eeb25",
            "81265577833a5584813a9b969f1d9714ea61d5dbdce6d5a145266fba215c336386d1ee91bddd6020cee5fa3434f28690c6a323a4cb5d126ed85a6801",
            "dc62799c64a33a8c1c20c4fb64e2fb181330f587ebefe525309a4189a6c106e28c764b0d730e31674917d7813242b24bf5321653aeadc544382c0253",
            "8c896ffb666765ed699275718fd2f9fcd787737bf7b478dd5a45c154921b86f86c387604d56d229e73864a85a62350d0adf2530687a53e59189d5f57",
            "c8f849d9203acf53687852f805498bec56d1366f29ee23e3103f677a1ffdd66ff4cc2e3478bdbd8bd1f67331dffc6a2a92f8ef1b38776401af6b7d6f",
            "7b950859e3b9d65f820eed7d0bf732b9131b4943b751ad6980b3bfa5f9780e620d548aadcbc88c8a10abcb844cc06f70fa8dd6d6bb8c379a4def70cb",
            "7de5707278a9024c6a2084367f03041c4baa62c2a124f2fdd03441cb6e70237220670b1dc581e849d419cebf643005f7e43da2be7dd1e0517770362b",
            "ff6e39c12baeac910b5dbf0c42813c8241a924656c181352083cc8efc6277651a1afe9c506579b2ba684db4d6045423d2e675ed28a65563ae9895eed",
            "9d943a50bba30124af72c311b28e69046119bfd13b838425aae9fc1c6bf42bbb2564bf868935a2359c550e8b26247e502d5eb14c37e1c9d63b4b138d",
            "f0aff493a730dc4afe71d136d1240d825767bbc628a0b5a6f920"
        ].joined())

    static let plainText = """
        [keyring]
        display-name=Plainfx
        ctime=1795555246
        mtime=0
        lock-on-idle=false
        lock-after=false

        [2]
        item-type=0
        display-name=Git: https://git.example.com/
        secret=git-pw
        mtime=1795555246
        ctime=1795555246

        [2:attribute0]
        name=protocol
        type=string
        value=https

        [2:attribute1]
        name=server
        type=string
        value=git.example.com

        [2:attribute2]
        name=user
        type=string
        value=ann

        [2:attribute3]
        name=xdg:schema
        type=string
        value=org.git.Password

        [3]
        item-type=0
        display-name=\\s\\sspaced\\nlabel
        binary-secret=00FF0180
        mtime=1795555246
        ctime=1795555246

        [3:attribute0]
        name=app
        type=string
        value=bin

        [3:attribute1]
        name=k=v
        type=string
        value=\\sx\\\\y 

        [1]
        item-type=0
        display-name=Chromium Safe Storage
        secret=c2VjcmV0LWtleQ==
        mtime=1795555246
        ctime=1795555246

        [1:attribute0]
        name=application
        type=string
        value=chromium

        [1:attribute1]
        name=xdg:schema
        type=string
        value=chrome_libsecret_os_crypt_password_v2

        [4]
        item-type=0
        display-name=
        mtime=0
        ctime=1795555246
        """

    static func hex(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = text.startIndex
        while i < text.endIndex {
            let next = text.index(i, offsetBy: 2)
            out.append(UInt8(text[i..<next], radix: 16)!)
            i = next
        }
        return out
    }
}
