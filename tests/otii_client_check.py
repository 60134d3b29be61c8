#!/usr/bin/env python3
"""Qoitech's own Otii client (otii-tcp-client from PyPI) against lab's stand-in Otii server:
the calls lab's backend makes, in its order, through the official API.

Usage: otii_client_check.py PORT SECONDS [Arc|Ace]
The instrument is an Arc unless told; an Ace's sample rate is set as lab sets it.
Prints one JSON object with what the client got; exits non-zero if a call fails.
Run by tests/integration/otii_standin.rs (docs/platforms/monitors.md).
"""
import json
import sys
import time

from otii_tcp_client import otii_client, otii_exception

port, seconds = int(sys.argv[1]), float(sys.argv[2])
kind = sys.argv[3] if len(sys.argv) > 3 else "Arc"
out = {}

# The default licensing, as a user's script has it: connect() reserves, disconnect() returns.
auto = otii_client.OtiiClient()
otii = auto.connect(host="127.0.0.1", port=port, try_for_seconds=5)
out["auto_devices"] = [d.name for d in otii.get_devices(timeout=2)]
auto.disconnect()

# Explicit steps, as lab's backend takes them.
client = otii_client.OtiiClient()
otii = client.connect(host="127.0.0.1", port=port, try_for_seconds=5, licensing=otii_client.LicensingMode.MANUAL)
licence = None
try:
    out["logged_in"] = otii.is_logged_in()
    free = [l for l in otii.get_licenses() if l["type"] == "Automation" and l["available"] and l["reserved_to"] == ""]
    licence = free[0]["id"]
    otii.reserve_license(licence)
    arc = [d for d in otii.get_devices(timeout=2) if d.type == kind][0]
    out["device"] = {"id": arc.id, "name": arc.name, "version": arc.get_version()}
    try:
        arc.set_main_voltage(9.9)
    except otii_exception.Otii_Exception as e:
        out["refused"] = {"type": e.type, "message": e.message}
    arc.set_main_voltage(3.8)
    arc.set_max_current(2.0)
    out["voltage"] = arc.get_main_voltage()
    arc.enable_channel("mc", True)
    # lab sets an Ace's main-current rate; an Arc refuses it (its rate is fixed over TCP).
    try:
        arc.set_channel_samplerate("mc", 1000)
    except otii_exception.Otii_Exception as e:
        out["samplerate_refused"] = e.type
    out["samplerate"] = arc.get_channel_samplerate("mc")
    arc.set_main(True)
    project = otii.create_project()
    project.start_recording()
    recording = project.get_last_recording()
    recording.log("soak start", 0)
    time.sleep(seconds)
    # Where a running recording's samples end, as lab places its markers.
    out["info_running"] = recording.get_channel_info(arc.id, "mc")
    recording.log("soak end", 0)
    project.stop_recording()
    arc.set_main(False)
    recording = project.get_last_recording()
    out["running"] = recording.is_running()
    count = recording.get_channel_data_count(arc.id, "mc")
    data = recording.get_channel_data(arc.id, "mc", 0, count)
    info = recording.get_channel_info(arc.id, "mc")
    stats = recording.get_channel_statistics(arc.id, "mc", info["from"], info["to"])
    out["count"] = count
    out["values"] = len(data["values"])
    out["interval"] = data["interval"]
    out["charge"] = sum(data["values"]) * data["interval"]
    out["info"] = info
    out["stats_energy"] = stats["energy"]
finally:
    if licence is not None:
        otii.return_license(licence)
    client.disconnect()

print(json.dumps(out))
