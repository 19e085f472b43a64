#!/usr/bin/env python3
# conclave reference dongle on a PC: conclave_dongle.py under CPython, behind a
# pseudo-terminal, on a simulated air shared with the other processes given the same --air
# (see hal_host.py). For tests, benchmarks and trying a gateway without a board:
#
#   python3 firmware/micropython/host_dongle.py --air 239.7.7.7:47000 --mac 02:00:00:00:00:01 \
#       --link /tmp/dongle-a &
#   conclave dongle check /tmp/dongle-a
#
# Once the dongle is up it prints one line on standard output and nothing more:
#   ready pty=/dev/pts/N link=PATH mac=MAC air=GROUP:PORT pid=PID
# SIGUSR1 restarts the dongle as a watchdog would; SIGTERM and SIGINT stop it (removing the
# link); SIGKILL is the dongle pulled out of its socket.

import argparse
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import conclave_dongle  # noqa: E402
import hal_host  # noqa: E402


def options(argv):
    parser = argparse.ArgumentParser(
        description="conclave's reference dongle firmware on a pseudo-terminal and a "
        "simulated ESP-NOW air (UDP multicast on loopback)"
    )
    parser.add_argument(
        "--air",
        required=True,
        help="the simulated air, GROUP:PORT with GROUP an IPv4 multicast address "
        "(239.x.y.z); every dongle given the same one hears the others",
    )
    parser.add_argument("--mac", default="02:00:00:00:00:01", help="the dongle's MAC")
    parser.add_argument(
        "--link", help="keep a symbolic link to the pseudo-terminal's slave at this path"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of loss and RSSI jitter")
    parser.add_argument(
        "--loss", type=float, default=0.0, help="chance that a frame is not heard (0 to 1)"
    )
    parser.add_argument("--rssi", type=int, default=-50, help="RSSI of what it hears, dBm")
    parser.add_argument("--rssi-jitter", type=int, default=3, help="RSSI varies by +-this")
    parser.add_argument(
        "--ack-timeout-ms",
        type=int,
        default=10,
        help="how long the radio waits for a unicast acknowledgement before a retry",
    )
    parser.add_argument(
        "--attempts", type=int, default=3, help="transmissions of a unicast frame at most"
    )
    parser.add_argument("--tx-credits", type=int, default=8, help="INFO.tx_credits")
    parser.add_argument(
        "--max-peers",
        type=int,
        default=hal_host.ESPNOW_TOTAL_PEERS - 1,
        help="INFO.max_peers (ESP-NOW: 20 with the broadcast peer, so 19)",
    )
    parser.add_argument(
        "--max-encrypted",
        type=int,
        default=hal_host.MICROPYTHON_ENCRYPTED_PEERS,
        help="encrypted peers at most (MicroPython's espnow: 6)",
    )
    parser.add_argument(
        "--channels", type=int, default=13, help="the highest channel the radio accepts"
    )
    parser.add_argument(
        "--stats-ms", type=int, default=1000, help="STATS period in ms; 0: none (tests only)"
    )
    parser.add_argument(
        "--output-budget",
        type=int,
        default=16384,
        help="bytes queued for the serial line before LOG, then RX, are dropped",
    )
    parser.add_argument(
        "--firmware-text", help="firmware text in INFO (default: conclave-dongle-py VERSION host)"
    )
    parser.add_argument(
        "--boot-text",
        action="store_true",
        help="print an ESP32 ROM banner before every BOOT, as a real board does",
    )
    parser.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop when the process that started this one ends (tests)",
    )
    parsed = parser.parse_args(argv)
    if parsed.tx_credits < 1 or parsed.tx_credits > 255:
        parser.error("--tx-credits must be 1 to 255")
    if parsed.max_peers < 0 or parsed.max_peers > hal_host.ESPNOW_TOTAL_PEERS - 1:
        parser.error("--max-peers must be 0 to 19: ESP-NOW holds 20 peers with the broadcast one")
    try:
        hal_host.parse_mac(parsed.mac)
    except ValueError as err:
        parser.error("--mac: %s" % err)
    return parsed


def main(argv):
    parsed = options(argv)
    hal = hal_host.Hal(parsed)

    def stop(signum, frame):
        hal.close()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sys.stdout.write(
        "ready pty=%s link=%s mac=%s air=%s pid=%d\n"
        % (hal.pty.slave, parsed.link or "", parsed.mac, parsed.air, os.getpid())
    )
    sys.stdout.flush()
    reason = conclave_dongle.POWER_ON
    while True:
        dongle = conclave_dongle.Dongle(hal, reason)
        try:
            dongle.run()
        except hal_host.Restart as restart:
            reason = restart.reason
            hal.boot()


if __name__ == "__main__":
    main(sys.argv[1:])
