# conclave reference dongle: the HAL of an ESP32 running MicroPython (>= 1.21).
#
# Everything board-specific that conclave_dongle.py needs: the serial stream to the host, the
# radio (the `espnow` and `network` modules), the clock and the reset (`machine`, `time`).
#
# - Serial: the MicroPython console itself, which is the port the host opens: native USB
#   (USB-Serial-JTAG of the C3, C6 and S3, TinyUSB CDC of the S2 and S3) or UART0 behind the
#   board's USB-UART bridge. `micropython.kbd_intr(-1)` stops byte 0x03 of binary frames from
#   raising KeyboardInterrupt, and nothing else prints there while the dongle runs. The
#   console's stdin has no non-blocking bulk read, so bytes are taken one at a time while
#   `select.poll` says there are some. On a UART board the console's baud rate is switched
#   to `baud` (921600 by default, section 2 of the protocol).
# - Radio: Wi-Fi in station mode, not connected; ESP-NOW on; the broadcast peer registered.
#   Sends use `send(mac, data, False)` so the loop never blocks on the air; the outcome is
#   read from `ESPNow.stats()` (one frame at a time, so the next response is this frame's).
#   Received frames come from `irecv`, their RSSI from `ESPNow.peers_table`. MicroPython does
#   not report a frame's destination address, so RX.dst is the dongle's own MAC.
# - Reset reasons: `machine.reset_cause()` cannot tell a restart the host asked for from a
#   crash (both are soft resets), so the firmware leaves a word in RTC memory before it
#   restarts itself.

import sys
import time

import espnow
import machine
import micropython
import network
import select

import conclave_dongle as core

# How many received frames MicroPython's espnow buffers (bytes; a full frame takes 263).
RX_BUFFER = 8 * 263
# Longest wait for a send's outcome before it counts as failed (the radio answers in ms).
TX_TIMEOUT_MS = 1000
# Bytes taken from the console per turn of the loop.
READ_CHUNK = 512
# Words left in RTC memory by the firmware before it restarts itself.
_MARK_HOST = b"conclave:reset"
_MARK_CRASH = b"conclave:crash"


def _sta_if():
    wlan = getattr(network, "WLAN")
    return getattr(wlan, "IF_STA", getattr(network, "STA_IF", 0))


class Hal:
    """The HAL of conclave_dongle.py on an ESP32. Build it, then `boot()` before a Dongle."""

    def __init__(self, baud=921600, tx_credits=8, watchdog_ms=8000):
        self.firmware_text = "conclave-dongle-py %s esp32" % core.VERSION
        self.tx_credits = tx_credits
        self.output_budget = 4096
        self.stats_period_ms = 1000
        self.baud = baud
        self.watchdog_ms = watchdog_ms
        self.wdt = None
        self.espnow = None
        self.sta = None
        self.channel = core.DEFAULT_CHANNEL
        self.one = bytearray(1)
        self.chunk = bytearray(READ_CHUNK)
        self.us = 0
        self.us_at = time.ticks_us()
        self.tx_before = None
        self.tx_started = 0

    # -- start ----------------------------------------------------------------------------

    def reset_reason(self):
        """BOOT's reason (section 5.13), from machine.reset_cause() and the RTC word."""
        rtc = machine.RTC()
        try:
            mark = bytes(rtc.memory())
        except (AttributeError, OSError):
            mark = b""
        if mark:
            rtc.memory(b"")
        if mark == _MARK_HOST:
            return core.HOST_REQUEST
        if mark == _MARK_CRASH:
            return core.CRASH
        cause = machine.reset_cause()
        if cause in (machine.PWRON_RESET, machine.HARD_RESET):
            # MicroPython reports a brown-out as a power-on as well.
            return core.POWER_ON
        if cause == machine.WDT_RESET:
            return core.WATCHDOG
        if cause == machine.SOFT_RESET:
            # A panic restarts the chip the way machine.reset() does.
            return core.CRASH
        return core.OTHER_REASON

    def boot(self):
        """Takes the console, starts Wi-Fi and ESP-NOW (section 8, step 1)."""
        micropython.kbd_intr(-1)
        if self.baud:
            try:
                # Only UART boards have their console on UART0; on native USB this changes a
                # UART nobody listens to.
                machine.UART(0, baudrate=self.baud)
            except (ValueError, OSError):
                pass
        self.stdin = sys.stdin.buffer
        self.stdout = sys.stdout.buffer
        self.sta = network.WLAN(_sta_if())
        self.sta.active(True)
        try:
            self.sta.disconnect()
        except OSError:
            pass
        self.espnow = espnow.ESPNow()
        self.espnow.config(rxbuf=RX_BUFFER)
        self.espnow.active(True)
        self.radio_set_channel(core.DEFAULT_CHANNEL)
        self.espnow.add_peer(core.BROADCAST)
        self.console = select.poll()
        self.console.register(sys.stdin, select.POLLIN)
        self.poller = select.poll()
        self.poller.register(sys.stdin, select.POLLIN)
        self.poller.register(self.espnow, select.POLLIN)
        if self.watchdog_ms:
            self.wdt = machine.WDT(timeout=self.watchdog_ms)

    # -- clock ----------------------------------------------------------------------------

    def ticks_ms(self):
        return time.ticks_ms()

    def ticks_add(self, ticks, delta):
        return time.ticks_add(ticks, delta)

    def ticks_diff(self, end, start):
        return time.ticks_diff(end, start)

    def ticks_us32(self):
        # time.ticks_us() wraps at 2**30; the protocol's timestamp wraps at 2**32.
        now = time.ticks_us()
        self.us = (self.us + time.ticks_diff(now, self.us_at)) & 0xFFFFFFFF
        self.us_at = now
        return self.us

    # -- serial ---------------------------------------------------------------------------

    def serial_read(self):
        count = 0
        chunk = self.chunk
        while count < READ_CHUNK and self.console.poll(0):
            self.stdin.readinto(self.one)
            chunk[count] = self.one[0]
            count += 1
        if count == 0:
            return None
        return bytes(chunk[:count])

    def serial_write(self, data):
        # The console's write blocks until the bytes are in its driver's buffer.
        written = self.stdout.write(data)
        return len(data) if written is None else written

    def serial_drain(self):
        # Time for the last bytes to leave the UART or the USB buffer (2 ms at 921600 baud
        # is 180 bytes).
        time.sleep_ms(20)

    def wait(self, timeout_ms, want_write, tx_busy):
        if self.wdt is not None:
            self.wdt.feed()
        if tx_busy:
            timeout_ms = min(timeout_ms, 1)
        if want_write:
            timeout_ms = 0
        self.poller.poll(timeout_ms)

    def restart(self, reason):
        self.mark_restart(_MARK_HOST if reason == core.HOST_REQUEST else _MARK_CRASH)
        machine.reset()

    def mark_restart(self, mark):
        try:
            machine.RTC().memory(mark)
        except (AttributeError, OSError):
            pass

    # -- radio ----------------------------------------------------------------------------

    def radio_mac(self):
        return self.sta.config("mac")

    def radio_limits(self):
        encrypted = getattr(espnow, "MAX_ENCRYPT_PEER_NUM", 6)
        total = getattr(espnow, "MAX_TOTAL_PEER_NUM", 20)
        # ESP-NOW v1 (MicroPython's espnow caps messages at MAX_DATA_LEN, 250); one entry of
        # the peer table is the broadcast peer the firmware keeps.
        return (1, getattr(espnow, "MAX_DATA_LEN", 250), total - 1, encrypted)

    def radio_channel(self):
        return self.channel

    def radio_set_channel(self, channel):
        self.sta.config(channel=channel)
        self.channel = channel

    def radio_set_pmk(self, pmk):
        self.espnow.set_pmk(bytes(pmk))

    def radio_add_peer(self, mac, channel, encrypt, lmk):
        mac = bytes(mac)
        try:
            self.espnow.del_peer(mac)
        except OSError:
            pass
        if encrypt:
            self.espnow.add_peer(mac, bytes(lmk), channel, 0, True)
        else:
            self.espnow.add_peer(mac, None, channel, 0, False)

    def radio_del_peer(self, mac):
        self.espnow.del_peer(bytes(mac))

    def radio_send(self, mac, data):
        self.tx_before = self.espnow.stats()
        self.tx_started = time.ticks_ms()
        self.espnow.send(bytes(mac), data, False)

    def radio_tx_result(self):
        before = self.tx_before
        if before is None:
            return None
        now = self.espnow.stats()
        if now[1] != before[1]:
            self.tx_before = None
            return now[2] == before[2]
        if time.ticks_diff(time.ticks_ms(), self.tx_started) > TX_TIMEOUT_MS:
            self.tx_before = None
            return False
        return None

    def radio_recv(self):
        if not self.espnow.any():
            return None
        mac, msg = self.espnow.irecv(0)
        if mac is None:
            return None
        rssi = -127
        entry = self.espnow.peers_table.get(mac)
        if entry:
            rssi = entry[0]
        # irecv reuses its buffers: copy the frame out.
        return (bytes(mac), None, rssi, self.channel, self.ticks_us32(), bytes(msg))

    def radio_dropped(self):
        return self.espnow.stats()[4]
