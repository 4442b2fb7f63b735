#!/usr/bin/env python3
"""Writes a firmware boot event log (TCG PC Client, crypto-agile, SHA-256 bank only), as the
kernel shows it in /sys/kernel/security/tpm0/binary_bios_measurements, for the measurements
given: event-log.py OUT PCR:HEX-SHA256 ... (each one an EV_EFI_VARIABLE_DRIVER_CONFIG event)."""
import struct
import sys

EV_NO_ACTION, EV_EFI_VARIABLE_DRIVER_CONFIG, SHA256 = 3, 0x80000001, 0x000B

spec = b"Spec ID Event03\0" + struct.pack("<IBBBBI", 0, 0, 2, 0, 2, 1) + struct.pack("<HH", SHA256, 32) + b"\0"
log = struct.pack("<II", 0, EV_NO_ACTION) + bytes(20) + struct.pack("<I", len(spec)) + spec
for item in sys.argv[2:]:
    pcr, digest = item.split(":")
    data = b"measured"
    log += struct.pack("<IIIH", int(pcr), EV_EFI_VARIABLE_DRIVER_CONFIG, 1, SHA256) + bytes.fromhex(digest)
    log += struct.pack("<I", len(data)) + data
with open(sys.argv[1], "wb") as out:
    out.write(log)
