#!/usr/bin/env python3
"""Monsoon's own Python API (`monsoon` 0.1.88 from PyPI) on the bytes lab decoded.

Usage: monsoon_decode_check.py DIR
DIR holds what src/monitor/monsoon/python_check.rs wrote: case.json (the model, the
settings, the fake's registers, lab's control requests, where each packet's first
measurement is in lab's samples), packets.bin (the 64-byte packets as read from USB),
fake_fields.i32 (what the fake meant each packet to hold: 33 little-endian int32 a packet,
in the order swizzlePacket returns them), lab_main_ma.f64 and lab_main_v.f64 (lab's
samples, little-endian float64).

The API's own code does the work: HVPM.Monsoon / LVPM.Monsoon.swizzlePacket unpacks each
packet (checked against the fake's fields: the fake's encoder is its own, not lab's);
pmapi.USB_protocol talks to a stand-in for the pyusb device (control transfers answered
from the registers, bulk reads served from packets.bin), the Monsoon object reads the
calibration (fillStatusPacket) and sets the supply as lab's session does, and
sampleEngine.SampleEngine.startSampling decodes the packets until they run out. Prints one
JSON object: how many packets' fields differ from the fake's, how many samples were
compared and how many of them have the same bits as lab's; the Rust test judges them.
"""
import array
import contextlib
import json
import struct
import sys
from pathlib import Path

import numpy as np
from Monsoon import HVPM, LVPM, pmapi, sampleEngine


class Exhausted(Exception):
    """Every packet has been read."""


class StandinDevice:
    """What pmapi.USB_protocol calls on a pyusb usb.core.Device: ctrl_transfer and read."""

    def __init__(self, registers, packets):
        self.registers = dict(registers)
        self.packets = packets
        self.served = 0
        self.sampling = False
        self.out = []

    def ctrl_transfer(self, bmRequestType, bRequest, wValue=0, wIndex=0, data_or_wLength=None, timeout=None):
        if bmRequestType == 0xC0:
            opcode = wIndex & 0xFF
            if opcode == 0xC4:  # getStartStatus: the sampling bit
                value = 0x80 if self.sampling else 0
            else:
                value = self.registers.get(opcode, 0)
            return array.array("B", struct.pack("<I", value)[:data_or_wLength])
        data = b"" if isinstance(data_or_wLength, int) or data_or_wLength is None else bytes(data_or_wLength)
        self.out.append([bRequest, wValue, wIndex, data.hex()])
        if bRequest == 0x01 and len(data) == 4:
            self.registers[wIndex & 0xFF] = struct.unpack("<I", data)[0]
        elif bRequest == 0x02:
            self.sampling = True
        elif bRequest == 0x03:
            self.sampling = False
        return len(data)

    def read(self, endpoint, size, timeout=None):
        if (self.served + 1) * 64 > len(self.packets):
            raise Exhausted()
        packet = self.packets[self.served * 64 : (self.served + 1) * 64]
        self.served += 1
        return array.array("B", packet)


def main():
    folder = Path(sys.argv[1])
    case = json.loads((folder / "case.json").read_text())
    registers = {int(k): v for k, v in case["registers"].items()}
    # What the instrument holds before lab's session sets it up.
    registers[0x10] = 2
    device = StandinDevice(registers, (folder / "packets.bin").read_bytes())
    protocol = pmapi.USB_protocol()
    protocol.DEVICE = device  # what Connect() finds with usb.core.find
    hvpm = case["model"] == "hvpm"
    monsoon = HVPM.Monsoon() if hvpm else LVPM.Monsoon()
    monsoon.Protocol = protocol  # what setup_usb() leaves

    # The fake's packets as the API unpacks them, against what the fake meant.
    raw = device.packets
    fields = np.fromfile(folder / "fake_fields.i32", dtype="<i4").reshape(-1, 33)
    unpacked = np.array(
        [monsoon.swizzlePacket(array.array("B", raw[i * 64 : (i + 1) * 64])) for i in range(len(raw) // 64)],
        dtype=np.int64,
    )
    fields_differ = int(np.sum(np.any(unpacked != fields, axis=1))) if len(unpacked) == len(fields) else None

    # lab's session, through the API: limits, voltage, passthrough; start; stop.
    if hvpm:
        monsoon.setPowerUpCurrentLimit(case["current_limit_a"])
        monsoon.setRunTimeCurrentLimit(case["current_limit_a"])
    monsoon.setVout(case["voltage_v"])
    monsoon.setUSBPassthroughMode(case["passthrough"])

    engine = sampleEngine.SampleEngine(monsoon)
    engine.ConsoleOutput(False)
    engine.setStartTrigger(sampleEngine.triggers.GREATER_THAN, -1)
    get_samples = engine.getSamples
    startup = {}

    def first_get_samples():
        # __startupCheck calls it once calibrated: the packets read by then are the ones
        # the API does not decode.
        startup.setdefault("served", device.served)
        return get_samples()

    engine.getSamples = first_get_samples
    # The API prints as it goes ("Error: Unknown exception caught" at the end): to stderr,
    # so stdout is the JSON alone.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            engine.startSampling(sampleEngine.triggers.SAMPLECOUNT_INFINITE)
        except Exception:  # it re-raises Exhausted as a bare Exception, after stopping
            if device.served * 64 + 64 <= len(device.packets):
                raise
    samples = get_samples()
    api_ma = np.array(samples[sampleEngine.channels.MainCurrent], dtype=np.float64)
    api_v = np.array(samples[sampleEngine.channels.MainVoltage], dtype=np.float64)

    lab_ma = np.fromfile(folder / "lab_main_ma.f64", dtype="<f8")
    lab_v = np.fromfile(folder / "lab_main_v.f64", dtype="<f8")
    first = case["first_index"][startup["served"]] if startup["served"] < len(case["first_index"]) else None
    n = min(len(api_ma), len(lab_ma))
    a, b = api_ma[:n], lab_ma[first : first + n] if first is not None and first >= 0 else lab_ma[:0]
    n = min(n, len(b))
    a, b = a[:n], b[:n]
    va, vb = api_v[:n], lab_v[first : first + n] if n else lab_v[:0]
    print(
        json.dumps(
            {
                "packets_read": device.served,
                "startup_packets": startup["served"],
                "first_lab_index": first,
                "api_samples": int(len(api_ma)),
                "lab_samples": int(len(lab_ma)),
                "compared": int(n),
                "fields_checked": int(len(unpacked)),
                "fields_differ": fields_differ,
                # The same 64 bits (not merely ==, which takes -0.0 for 0.0).
                "bit_equal_ma": int(np.sum(a.view(np.int64) == b.view(np.int64))),
                "bit_equal_v": int(np.sum(va.view(np.int64) == vb.view(np.int64))),
                "max_abs_diff_ma": float(np.max(np.abs(a - b))) if n else None,
                "max_abs_diff_v": float(np.max(np.abs(va - vb))) if n else None,
                "api_controls_out": [c for c in device.out],
            }
        )
    )


if __name__ == "__main__":
    main()
