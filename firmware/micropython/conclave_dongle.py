# conclave reference dongle: the protocol logic (docs/dongle-protocol.md, ESP-1..5).
#
# This module is the whole dongle of the serial protocol -- framing (COBS, CRC-16/KERMIT),
# every message of section 5, the credits of section 7, the congestion rules of section 7.4,
# STATS every second, resets (section 8) -- and nothing board-specific: it reaches the serial
# line, the radio, the clock and the reset through a HAL object. `hal_esp32.py` is the HAL of a
# real ESP32 running MicroPython (>= 1.21) with its `espnow` module; `hal_host.py` runs the same
# module under CPython on a pseudo-terminal and a simulated air, which is how the Rust driver
# and whole gateways are tested against it (crates/espnow/tests/firmware_*.rs).
#
# It is plain Python that runs unchanged under MicroPython and CPython: no f-strings, no
# dataclasses, typing or enum, no bytearray methods MicroPython lacks (bytes.find, not
# bytearray.find), `const` from `micropython` when there is one, small allocations.
#
# The HAL interface (both HALs implement it; the names say what they do):
#
#   firmware_text          str, the firmware name and version in INFO (at most 32 bytes)
#   tx_credits             int, how many SENDs may be outstanding (INFO.tx_credits)
#   output_budget          int, bytes of dongle frames queued for the serial line before the
#                          congestion rules of section 7.4 drop LOG, then RX
#   stats_period_ms        int, period of STATS (1000; 0 turns them off, for tests only)
#   ticks_ms()             a millisecond clock; ticks_add(t, ms), ticks_diff(a, b) as in
#                          MicroPython's `time` (they handle the wrap of the board's clock)
#   ticks_us32()           microseconds since boot, wrapping at 2**32 (RX.timestamp_us)
#   serial_read()          bytes the host wrote, or None: never blocks
#   serial_write(buf)      writes what it can of buf, returns how many bytes (0: try later)
#   serial_drain()         waits until written bytes have left (before a restart)
#   wait(ms, want_write, tx_busy)
#                          sleeps until the host wrote, a frame came over the air, the line
#                          can take more (want_write) or the radio finished (tx_busy), or ms
#   restart(reason)        restarts the dongle (never returns)
#   radio_mac()            the station MAC, 6 bytes
#   radio_limits()         (espnow_version, max_payload, max_peers, max_encrypted_peers) of
#                          the build it runs on; max_peers excludes the broadcast peer
#   radio_channel()        the channel the radio is on
#   radio_set_channel(ch)  raises OSError if the radio refuses
#   radio_set_pmk(key)     raises OSError if the radio refuses
#   radio_add_peer(mac, channel, encrypt, lmk)   add or change; raises OSError
#   radio_del_peer(mac)    raises OSError
#   radio_send(mac, data)  starts one transmission; raises OSError if the radio refuses it
#   radio_tx_result()      None while it is in the air, then True (acknowledged; broadcast:
#                          sent) or False (not acknowledged)
#   radio_recv()           None, or (src, dst or None, rssi, channel, timestamp_us, payload)
#   radio_dropped()        frames the radio layer dropped since boot (its buffer was full)

try:
    from micropython import const
except ImportError:  # CPython

    def const(value):
        return value


try:
    import struct
except ImportError:  # very old MicroPython
    import ustruct as struct

VERSION = "1.0.0"

PROTOCOL_MAJOR = const(1)
PROTOCOL_MINOR = const(0)

# Message kinds (section 5.1).
HELLO = const(0x01)
RESET = const(0x02)
SET_CHANNEL = const(0x03)
ADD_PEER = const(0x04)
DEL_PEER = const(0x05)
SET_PMK = const(0x06)
SEND = const(0x07)
PING = const(0x08)
RESP = const(0x80)
INFO = const(0x81)
BOOT = const(0x82)
RX = const(0x83)
TX_DONE = const(0x84)
STATS = const(0x85)
LOG = const(0x86)

# RESP status codes (section 5.11).
OK = const(0)
UNKNOWN_KIND = const(1)
MALFORMED = const(2)
BAD_ARGUMENT = const(3)
NO_CREDIT = const(4)
PEER_TABLE_FULL = const(5)
UNKNOWN_PEER = const(6)
PAYLOAD_TOO_LARGE = const(7)
RADIO_ERROR = const(8)

# BOOT reasons (section 5.13).
POWER_ON = const(0)
HOST_REQUEST = const(1)
WATCHDOG = const(2)
CRASH = const(3)
BROWN_OUT = const(4)
OTHER_REASON = const(0xFF)

# LOG levels (section 5.17).
LOG_ERROR = const(0)
LOG_WARNING = const(1)
LOG_INFO = const(2)

# Sizes (section 3.5).
MAX_PAYLOAD = const(1500)
MAX_DECODED = const(1506)
MAX_ENCODED = const(1512)

BROADCAST = b"\xff\xff\xff\xff\xff\xff"
DEFAULT_CHANNEL = const(1)

# At most this many LOG lines a second (section 5.17: they share the line with RX).
_LOG_PER_SECOND = const(20)
# Frames taken from the radio per turn of the loop, so that a burst on the air cannot starve
# the host's requests.
_RX_PER_TURN = const(16)
# Bytes each queued frame costs besides its payload: header, CRC, COBS, delimiter.
_FRAME_OVERHEAD = const(12)

_ZERO = b"\x00"


def _make_crc_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            if crc & 1:
                crc = (crc >> 1) ^ 0x8408
            else:
                crc >>= 1
        table.append(crc)
    return table


_CRC_TABLE = _make_crc_table()


def crc16_kermit(data):
    """CRC-16/KERMIT (section 3.2): polynomial 0x1021 reflected, initial 0, no final XOR.
    The check value over b'123456789' is 0x2189."""
    table = _CRC_TABLE
    crc = 0
    for byte in data:
        crc = (crc >> 8) ^ table[(crc ^ byte) & 0xFF]
    return crc


def cobs_encode(data):
    """COBS of `data` (bytes), without the delimiter (section 3.3). Like the reference
    encoder, a full 254-byte block is closed with 0xff and followed by a block of its own,
    even at the end."""
    out = bytearray()
    length = len(data)
    start = 0
    while True:
        zero = data.find(_ZERO, start)
        end = length if zero < 0 else zero
        while end - start >= 254:
            out.append(0xFF)
            out.extend(data[start : start + 254])
            start += 254
        out.append(end - start + 1)
        out.extend(data[start:end])
        if zero < 0:
            return out
        start = zero + 1


def cobs_decode(encoded):
    """Decodes the bytes between two delimiters (they hold no zero, the delimiter cut there).
    Returns None for broken COBS or output longer than MAX_DECODED."""
    out = bytearray()
    index = 0
    length = len(encoded)
    while index < length:
        code = encoded[index]
        index += 1
        if code == 0 or index + code - 1 > length:
            return None
        out.extend(encoded[index : index + code - 1])
        index += code - 1
        if code != 0xFF and index < length:
            out.append(0)
        if len(out) > MAX_DECODED:
            return None
    return out


def encode_frame(version, kind, seq, payload):
    """A whole frame as it goes on the wire: COBS(body + CRC), then the delimiter."""
    body = bytearray(4)
    body[0] = version
    body[1] = kind
    body[2] = seq & 0xFF
    body[3] = (seq >> 8) & 0xFF
    body.extend(payload)
    crc = crc16_kermit(body)
    body.append(crc & 0xFF)
    body.append(crc >> 8)
    out = cobs_encode(bytes(body))
    out.append(0)
    return out


def decode_frame(encoded):
    """Steps 2 to 4 of section 3.6: returns (version, kind, seq, payload), or None when the
    frame is not to be trusted (broken COBS, too long, too short, bad CRC)."""
    decoded = cobs_decode(encoded)
    if decoded is None or len(decoded) < 6:
        return None
    end = len(decoded) - 2
    if crc16_kermit(decoded[:end]) != decoded[end] | (decoded[end + 1] << 8):
        return None
    return (
        decoded[0],
        decoded[1],
        decoded[2] | (decoded[3] << 8),
        bytes(decoded[4:end]),
    )


class Deframer:
    """Cuts the byte stream from the host at each 0x00 (section 3.4): empty frames are
    ignored, a run longer than MAX_ENCODED is dropped as it grows and counted once, and
    everything up to the next delimiter after it goes with it. The buffer never holds more
    than MAX_ENCODED bytes."""

    def __init__(self):
        self.buffer = bytearray()
        self.discarding = False
        self.oversize = 0

    def feed(self, data, deliver):
        """Hands every complete frame in `data` (bytes) to `deliver`."""
        length = len(data)
        start = 0
        while start < length:
            zero = data.find(_ZERO, start)
            end = length if zero < 0 else zero
            if not self.discarding and len(self.buffer) + end - start > MAX_ENCODED:
                self.buffer = bytearray()
                self.oversize += 1
                self.discarding = True
            if self.discarding:
                if zero < 0:
                    return
                self.discarding = False
                start = zero + 1
                continue
            self.buffer.extend(data[start:end])
            if zero < 0:
                return
            start = zero + 1
            if len(self.buffer) == 0:
                continue
            frame = bytes(self.buffer)
            self.buffer = bytearray()
            deliver(frame)


def mac_text(mac):
    return ":".join(["%02x" % byte for byte in mac])


def _radio_status(err):
    """The RESP status for an OSError of the radio (MicroPython names ESP-IDF's error in the
    exception's arguments; the host HAL does the same)."""
    text = str(err)
    if "FULL" in text:
        return PEER_TABLE_FULL
    if "NOT_FOUND" in text:
        return UNKNOWN_PEER
    return RADIO_ERROR


class Dongle:
    """The dongle between two restarts. `run()` serves the host until the HAL restarts it."""

    def __init__(self, hal, reason):
        self.hal = hal
        limits = hal.radio_limits()
        self.espnow_version = limits[0]
        self.max_payload = limits[1]
        self.max_peers = limits[2]
        self.max_encrypted = limits[3]
        self.mac = bytes(hal.radio_mac())
        self.tx_credits = hal.tx_credits
        self.budget = hal.output_budget
        self.deframer = Deframer()
        # The host's peers: mac -> encrypt flag. The broadcast peer is the firmware's own and
        # is not in here (section 10).
        self.peers = {}
        # SENDs answered OK whose TX_DONE is not written yet, oldest first: [seq, dst, data].
        # The first one is in the air while `in_air` is true (one at a time, section 7.1).
        self.tx_queue = []
        self.in_air = False
        # Frames for the host, in order: [kind, seq or None, payload]. A None seq is the
        # dongle's own counter, taken when the frame is written (section 4: a frame dropped
        # before it is written takes no number). Kind None is a lone delimiter.
        self.out = []
        self.out_bytes = 0
        self.writing = None
        self.next_seq = 0
        self.rx_dropped = 0
        self.tx_dropped = 0
        self.crc_errors = 0
        self.logs_dropped = 0
        self.congested_rx = 0
        now = hal.ticks_ms()
        self.log_window = now
        self.log_count = 0
        self.stats_period = hal.stats_period_ms
        self.stats_at = hal.ticks_add(now, self.stats_period)
        # Section 8: a lone delimiter ends whatever half frame the host holds, then BOOT.
        self._queue(None, None, b"")
        self._queue(BOOT, None, bytes((reason, PROTOCOL_MAJOR, PROTOCOL_MINOR)))

    # -- the loop -------------------------------------------------------------------------

    def run(self):
        hal = self.hal
        while True:
            timeout = self.step()
            hal.wait(timeout, self.writing is not None or len(self.out) > 0, self.in_air)

    def step(self):
        """One turn: the host's bytes, the radio, the clock, the line. Returns how long the
        loop may sleep, in ms."""
        hal = self.hal
        # Answers are never dropped, so a host that writes and never reads would make them
        # pile up: stop reading it while a backlog waits (its own writes then block).
        if self.out_bytes <= 2 * self.budget:
            data = hal.serial_read()
            if data:
                self.deframer.feed(data, self._on_frame)
        self._radio_tx()
        self._radio_rx()
        now = hal.ticks_ms()
        wait = 1000
        if self.stats_period > 0:
            due = hal.ticks_diff(self.stats_at, now)
            if due <= 0:
                self._stats()
                self.stats_at = hal.ticks_add(self.stats_at, self.stats_period)
                if hal.ticks_diff(self.stats_at, now) <= 0:
                    # The loop was held up for more than a period: start again from now.
                    self.stats_at = hal.ticks_add(now, self.stats_period)
                due = hal.ticks_diff(self.stats_at, now)
            wait = due
        self._flush()
        if self.congested_rx and not self.out and self.writing is None:
            self.log(
                LOG_WARNING,
                "serial line congested: %d RX frames dropped" % self.congested_rx,
            )
            self.congested_rx = 0
        return max(0, wait)

    # -- from the host --------------------------------------------------------------------

    def _on_frame(self, encoded):
        frame = decode_frame(encoded)
        if frame is None:
            # Steps 1 to 4 of section 3.6: nothing in it can be trusted, not even its seq.
            self.crc_errors += 1
            return
        version, kind, seq, payload = frame
        if version != PROTOCOL_MAJOR:
            # Step 5: another major still learns who we are, so it can refuse us clearly.
            if kind == HELLO:
                self._answer(INFO, seq, self._info())
            return
        if kind == HELLO:
            if len(payload) != 2:
                self._respond(seq, MALFORMED)
            else:
                self._answer(INFO, seq, self._info())
        elif kind == PING:
            self._respond(seq, OK if len(payload) == 0 else MALFORMED)
        elif kind == SEND:
            self._send(seq, payload)
        elif kind == SET_CHANNEL:
            self._set_channel(seq, payload)
        elif kind == ADD_PEER:
            self._add_peer(seq, payload)
        elif kind == DEL_PEER:
            self._del_peer(seq, payload)
        elif kind == SET_PMK:
            self._set_pmk(seq, payload)
        elif kind == RESET:
            if len(payload) != 0:
                self._respond(seq, MALFORMED)
            else:
                self._reset(seq)
        else:
            # Including the dongle's own kinds sent to it (section 5.1).
            self._respond(seq, UNKNOWN_KIND)

    def _info(self):
        text = self.hal.firmware_text.encode("utf-8")[:32]
        return (
            bytes((PROTOCOL_MAJOR, PROTOCOL_MINOR, len(text)))
            + text
            + self.mac
            + struct.pack(
                "<BHBBB",
                self.espnow_version,
                self.max_payload,
                self.hal.radio_channel(),
                self.tx_credits,
                self.max_peers,
            )
        )

    def _set_channel(self, seq, payload):
        if len(payload) != 1:
            return self._respond(seq, MALFORMED)
        channel = payload[0]
        if channel < 1 or channel > 14:
            return self._respond(seq, BAD_ARGUMENT)
        try:
            self.hal.radio_set_channel(channel)
        except OSError as err:
            self._respond(seq, RADIO_ERROR)
            return self.log(LOG_WARNING, "channel %d refused by the radio: %s" % (channel, err))
        self._respond(seq, OK)

    def _set_pmk(self, seq, payload):
        if len(payload) != 16:
            return self._respond(seq, MALFORMED)
        try:
            self.hal.radio_set_pmk(payload)
        except OSError as err:
            self._respond(seq, RADIO_ERROR)
            return self.log(LOG_WARNING, "PMK refused by the radio: %s" % err)
        self._respond(seq, OK)

    def _add_peer(self, seq, payload):
        if len(payload) != 24 or payload[7] > 1:
            return self._respond(seq, MALFORMED)
        mac = payload[0:6]
        channel = payload[6]
        encrypt = payload[7] == 1
        if channel > 14:
            return self._respond(seq, BAD_ARGUMENT)
        if mac == BROADCAST:
            # The firmware keeps the broadcast peer itself, and it is never encrypted.
            return self._respond(seq, BAD_ARGUMENT if encrypt else OK)
        if mac[0] & 1:
            return self._respond(seq, BAD_ARGUMENT)
        known = mac in self.peers
        if not known and len(self.peers) >= self.max_peers:
            return self._respond(seq, PEER_TABLE_FULL)
        if encrypt and not (known and self.peers[mac]):
            encrypted = 0
            for flag in self.peers.values():
                if flag:
                    encrypted += 1
            if encrypted >= self.max_encrypted:
                self._respond(seq, PEER_TABLE_FULL)
                return self.log(
                    LOG_WARNING,
                    "peer %s refused: this build holds at most %d encrypted peers"
                    % (mac_text(mac), self.max_encrypted),
                )
        try:
            self.hal.radio_add_peer(mac, channel, encrypt, payload[8:24])
        except OSError as err:
            status = _radio_status(err)
            if status != PEER_TABLE_FULL:
                status = RADIO_ERROR
            self._respond(seq, status)
            return self.log(LOG_WARNING, "peer %s refused by the radio: %s" % (mac_text(mac), err))
        self.peers[mac] = encrypt
        self._respond(seq, OK)

    def _del_peer(self, seq, payload):
        if len(payload) != 6:
            return self._respond(seq, MALFORMED)
        mac = payload
        if mac == BROADCAST:
            return self._respond(seq, BAD_ARGUMENT)
        if mac not in self.peers:
            return self._respond(seq, UNKNOWN_PEER)
        try:
            self.hal.radio_del_peer(mac)
        except OSError as err:
            self._respond(seq, RADIO_ERROR)
            return self.log(LOG_WARNING, "peer %s not removed: %s" % (mac_text(mac), err))
        del self.peers[mac]
        self._respond(seq, OK)

    def _send(self, seq, payload):
        # Checks in the order of section 5.9; a refused SEND never reached the air.
        status = OK
        if len(payload) < 8:
            status = MALFORMED
        else:
            dst = payload[0:6]
            length = payload[6] | (payload[7] << 8)
            if 8 + length != len(payload):
                status = MALFORMED
            elif length == 0:
                status = BAD_ARGUMENT
            elif length > self.max_payload:
                status = PAYLOAD_TOO_LARGE
            elif dst != BROADCAST and dst not in self.peers:
                status = UNKNOWN_PEER
            elif len(self.tx_queue) >= self.tx_credits:
                status = NO_CREDIT
        if status != OK:
            self.tx_dropped += 1
            return self._respond(seq, status)
        self.tx_queue.append([seq, dst, payload[8:]])
        # RESP OK is queued before the transmission starts, so it always precedes its TX_DONE.
        self._respond(seq, OK)
        self._radio_tx()

    def _reset(self, seq):
        self._respond(seq, OK)
        # Section 5.4: the answer leaves the line before the restart.
        hal = self.hal
        while self.out or self.writing is not None:
            self._flush()
            if self.out or self.writing is not None:
                hal.wait(10, True, False)
        hal.serial_drain()
        hal.restart(HOST_REQUEST)

    # -- the radio ------------------------------------------------------------------------

    def _radio_tx(self):
        hal = self.hal
        while self.tx_queue:
            entry = self.tx_queue[0]
            if self.in_air:
                result = hal.radio_tx_result()
                if result is None:
                    return
                self.in_air = False
                self.tx_queue.pop(0)
                self._tx_done(entry[0], entry[1], result or entry[1] == BROADCAST)
                continue
            try:
                hal.radio_send(entry[1], entry[2])
                self.in_air = True
            except OSError as err:
                # esp_now_send itself failed: the frame never reached the air (ok 0).
                self.tx_queue.pop(0)
                self.tx_dropped += 1
                self._tx_done(entry[0], entry[1], False)
                self.log(LOG_WARNING, "send to %s failed: %s" % (mac_text(entry[1]), err))

    def _tx_done(self, send_seq, dst, ok):
        payload = struct.pack("<H", send_seq) + dst + (b"\x01" if ok else b"\x00")
        self._queue(TX_DONE, None, payload)

    def _radio_rx(self):
        hal = self.hal
        for _ in range(_RX_PER_TURN):
            frame = hal.radio_recv()
            if frame is None:
                return
            src, dst, rssi, channel, timestamp, data = frame
            if dst is None:
                # MicroPython's espnow does not say where a frame was sent; what reaches the
                # dongle is addressed to it or to everyone, and the host does not tell them
                # apart (README: limits).
                dst = self.mac
            payload = (
                bytes(src)
                + bytes(dst)
                + struct.pack("<bBIH", rssi, channel, timestamp & 0xFFFFFFFF, len(data))
                + data
            )
            self._queue_rx(payload)

    # -- to the host ----------------------------------------------------------------------

    def _respond(self, seq, status):
        self._queue(RESP, seq, bytes((status,)))

    def _answer(self, kind, seq, payload):
        self._queue(kind, seq, payload)

    def _queue(self, kind, seq, payload):
        self.out.append([kind, seq, payload])
        self.out_bytes += len(payload) + _FRAME_OVERHEAD

    def _drop_logs(self):
        kept = []
        for entry in self.out:
            if entry[0] == LOG:
                self.out_bytes -= len(entry[2]) + _FRAME_OVERHEAD
                self.logs_dropped += 1
            else:
                kept.append(entry)
        self.out = kept

    def _queue_rx(self, payload):
        # Section 7.4: when the line cannot keep up, LOG goes first, then RX; answers, BOOT
        # and TX_DONE never.
        cost = len(payload) + _FRAME_OVERHEAD
        if self.out_bytes + cost > self.budget:
            self._drop_logs()
            if self.out_bytes + cost > self.budget:
                self.rx_dropped += 1
                self.congested_rx += 1
                return
        self._queue(RX, None, payload)

    def _stats(self):
        for entry in self.out:
            if entry[0] == STATS:
                # Still unwritten: the line is congested, and a STATS may be skipped.
                return
        rx_dropped = (self.rx_dropped + self.hal.radio_dropped()) & 0xFFFFFFFF
        crc_errors = (self.crc_errors + self.deframer.oversize) & 0xFFFFFFFF
        payload = struct.pack("<III", rx_dropped, self.tx_dropped & 0xFFFFFFFF, crc_errors)
        if self.out_bytes + len(payload) + _FRAME_OVERHEAD > self.budget:
            return
        self._queue(STATS, None, payload)

    def log(self, level, text):
        """Sends a LOG line, at most 20 a second, never when the line is congested."""
        hal = self.hal
        now = hal.ticks_ms()
        if hal.ticks_diff(now, self.log_window) >= 1000:
            self.log_window = now
            self.log_count = 0
        data = text.encode("utf-8")
        if len(data) > 255:
            # Cut at a character boundary (section 5.2: never half a character).
            cut = 255
            while cut > 0 and (data[cut] & 0xC0) == 0x80:
                cut -= 1
            data = data[:cut]
        cost = len(data) + 2 + _FRAME_OVERHEAD
        if self.log_count >= _LOG_PER_SECOND or self.out_bytes + cost > self.budget:
            self.logs_dropped += 1
            return
        self.log_count += 1
        self._queue(LOG, None, bytes((level, len(data))) + data)

    def _flush(self):
        """Writes queued frames while the line takes them."""
        hal = self.hal
        while True:
            if self.writing is None:
                if not self.out:
                    return
                kind, seq, payload = self.out.pop(0)
                self.out_bytes -= len(payload) + _FRAME_OVERHEAD
                if kind is None:
                    frame = bytearray(_ZERO)
                else:
                    if seq is None:
                        seq = self.next_seq
                        self.next_seq = (self.next_seq + 1) & 0xFFFF
                    frame = encode_frame(PROTOCOL_MAJOR, kind, seq, payload)
                self.writing = memoryview(frame)
            written = hal.serial_write(self.writing)
            if not written:
                return
            if written >= len(self.writing):
                self.writing = None
            else:
                self.writing = self.writing[written:]
