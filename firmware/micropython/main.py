# conclave reference dongle: the entry point on an ESP32 running MicroPython (>= 1.21).
#
# MicroPython runs main.py at every start. Copy it with conclave_dongle.py and hal_esp32.py
# (README.md); from then on the board is a conclave dongle on its USB port.
#
# Settings:
# - SERIAL_BAUD: the console's baud rate on boards with a USB-UART bridge (CP210x, CH34x,
#   FTDI); the gateway's [link.espnow] baud must match. None keeps MicroPython's 115200.
#   Native USB boards ignore it.
# - REPL_PIN: a button held down while the board starts (the BOOT button on most boards)
#   leaves the dongle off and the MicroPython prompt on the port, to update the files with
#   mpremote: once the dongle runs, byte 0x03 no longer interrupts it.
# - TX_CREDITS: INFO.tx_credits, the SENDs the host may have outstanding (section 7).

import sys

import machine

SERIAL_BAUD = 921600
TX_CREDITS = 8


def _repl_pin():
    # The BOOT button: GPIO9 on the ESP32-C3 and C6, GPIO0 on the ESP32, S2 and S3.
    name = getattr(sys.implementation, "_machine", "")
    if "C3" in name or "C6" in name:
        return 9
    return 0


REPL_PIN = _repl_pin()


def _repl_requested():
    try:
        return machine.Pin(REPL_PIN, machine.Pin.IN, machine.Pin.PULL_UP).value() == 0
    except (ValueError, OSError):
        return False


def main():
    if _repl_requested():
        print("conclave dongle: button on GPIO%d held, staying at the prompt" % REPL_PIN)
        return
    import conclave_dongle
    import hal_esp32

    hal = hal_esp32.Hal(baud=SERIAL_BAUD, tx_credits=TX_CREDITS)
    reason = hal.reset_reason()
    try:
        hal.boot()
        conclave_dongle.Dongle(hal, reason).run()
    except Exception:  # noqa: BLE001 - anything at all: restart rather than sit at a prompt
        # A traceback on the port would only be garbage to the host; a restart brings the
        # dongle back, and its BOOT says CRASH.
        hal.mark_restart(b"conclave:crash")
        machine.reset()


main()
