#ifndef CFOUNDATION_BRIDGE_H
#define CFOUNDATION_BRIDGE_H

/* Two functions of the CoreFoundation inside swift-corelibs-foundation: libFoundation.so exports
 * them, and its NSDictionary is toll-free bridged to CFDictionary. They hand a dictionary's keys
 * and values as the objects it holds, where NSDictionary's Swift interface first converts every
 * one to a Swift value (a kSec constant's String decoded from UTF-16 code units, kSecValueData's
 * Data copied byte by byte): most of what reading a SecItem dictionary cost.
 *
 * Declared here under names of our own (asm labels give the real symbols), not imported: the
 * CoreFoundation module would shadow the CF types the Security module defines itself. */
long keychain_cf_dictionary_count(const void *dictionary) __asm__("CFDictionaryGetCount");
void keychain_cf_dictionary_keys_and_values(const void *dictionary, const void **keys, const void **values)
    __asm__("CFDictionaryGetKeysAndValues");

#endif
