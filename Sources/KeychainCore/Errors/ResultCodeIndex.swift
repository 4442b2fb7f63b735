extension ResultCode {
    /// The table by value (SecBase.h gives no two codes the same value).
    static let byStatus: [Int32: ResultCode] = Dictionary(all.map { ($0.status, $0) }, uniquingKeysWith: { first, _ in first })
}
