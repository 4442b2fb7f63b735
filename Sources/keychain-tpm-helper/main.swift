import Glibc
import KeychainCore

// The TPM for the fully static tools (`security`, the credential helpers), which cannot load
// tpm2-tss themselves: one request on standard input, one answer on standard output
// (Sources/KeychainCore/TPM/TPMAccess.swift). Linked with the Swift runtime inside but against the
// system's C library, so tpm2-tss and its libcrypto load as in any program.
exit(TPMHelperService.main())
