import KeychainBroker
import KeychainCore
import SecretServiceBus

/// The service as the broker's deputy (issue 55): the client on the bus is named with every item
/// key read for it (`BrokerRelay`, as keychain-ssh-agent names its client), and asked about by
/// name when it stores an item, so that the item trusts that program, not the service.
final class BrokerDeputy: ClientRelay {
    let custodian: BrokerCustodian

    init(custodian: BrokerCustodian) { self.custodian = custodian }

    func serving<T>(pidfd: Int32, note: String, _ body: () throws -> T) throws -> T {
        try BrokerRelay.serving(RelayedClient(pidfd: pidfd, confirmEach: false, note: note), body)
    }

    func entry(of pidfd: Int32) throws -> AccessList.Entry? {
        let caller = try BrokerRelay.serving(RelayedClient(pidfd: pidfd, confirmEach: false, note: "")) { try custodian.whoAmI() }
        return caller.entry.isEmpty ? nil : AccessList.Entry(caller.entry)
    }
}
