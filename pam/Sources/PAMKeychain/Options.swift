/// The module's arguments in /etc/pam.d: `debug`, `auto_create`, `lock_on_close`, `only_if=svc,...`.
struct Options {
    var debug = false
    var autoCreate = false
    var lockOnClose = false
    var onlyServices: [String]?
    var unknown: [String] = []

    init(argc: Int32, argv: UnsafePointer<UnsafePointer<CChar>?>?) {
        for i in 0..<Int(max(argc, 0)) {
            guard let raw = argv?[i] else { continue }
            let arg = String(cString: raw)
            switch arg {
            case "debug": debug = true
            case "auto_create": autoCreate = true
            case "lock_on_close": lockOnClose = true
            default:
                if arg.hasPrefix("only_if=") {
                    onlyServices = arg.dropFirst("only_if=".count).split(separator: ",").map(String.init)
                } else {
                    unknown.append(arg)
                }
            }
        }
    }

    func applies(to service: String?) -> Bool {
        guard let onlyServices else { return true }
        return service.map(onlyServices.contains) ?? false
    }
}
