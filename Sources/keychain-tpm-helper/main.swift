import Glibc
import KeychainCore
import KeychainTPM
import KeychainTPMClient

// The keychain's TPM operations in a process of their own (Sources/KeychainCore/TPM/TPMAccess.swift):
// one request on standard input, one answer on standard output, through tpm2-tss. The only
// program that links tpm2-tss: the tools are fully static, and Debian has no static tpm2-tss.
// tpm2-tss prints every TPM error (a wrong password's included) on standard error unless told not.
setenv("TSS2_LOG", "all+NONE", 0)
exit(TPMHelperService.main { LocalTPM(configuration: $0) })

// The SSH agent's keys inside the TPM (KeychainTPMClient's TPMSigningKeys): LocalTPM's own
// operations; declared here, the one program that has both.
extension LocalTPM: TPMSigningOperations {}
