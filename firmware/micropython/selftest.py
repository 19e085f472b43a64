# conclave reference dongle: the protocol logic against the examples of
# docs/dongle-protocol.md section 5, on an in-memory HAL. Runs under CPython and MicroPython
# alike (the point: the same module runs on the board), from the repository root or with the
# document's path as argument:
#
#   python3 firmware/micropython/selftest.py docs/dongle-protocol.md
#   micropython firmware/micropython/selftest.py docs/dongle-protocol.md
#
# Prints "N passed, 0 failed" and exits 0, or names every failed check and exits 1. Run by
# `cargo test` (crates/espnow/tests/firmware_conformance.rs).

import sys

try:
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
except (AttributeError, NameError):  # MicroPython without __file__
    sys.path.insert(0, "firmware/micropython")

import conclave_dongle as core

DONGLE_MAC = b"\x24\x6f\x28\xaa\xbb\xcc"
GW_B = b"\x24\x6f\x28\x0b\x0b\x0b"
GW_C = b"\x24\x6f\x28\x0c\x0c\x0c"
GW_D = b"\x24\x6f\x28\x0d\x0d\x0d"


def hexbytes(text):
    return bytes([int(part, 16) for part in text.split()])


def examples(path):
    """The wire bytes of every `<!-- example:NAME -->` of the document, by name."""
    found = {}
    name = None
    inside = False
    collected = []
    with open(path) as doc:
        for line in doc:
            line = line.strip()
            if line.startswith("<!-- example:"):
                name = line[len("<!-- example:") : -len(" -->")]
                collected = []
            elif name and line.startswith("```text"):
                inside = True
            elif name and inside and line.startswith("```"):
                inside = False
                found[name] = hexbytes(" ".join(collected))
                name = None
            elif inside:
                collected.append(line)
    return found


class Restarted(Exception):
    pass


class FakeHal:
    """A HAL in memory: what the dongle writes is collected, time moves when told."""

    def __init__(self, tx_credits=8):
        self.firmware_text = "conclave-dongle 1.0.0"
        self.tx_credits = tx_credits
        self.output_budget = 2048
        self.stats_period_ms = 1000
        self.now = 1000
        self.incoming = []
        self.trickle = False
        self.written = bytearray()
        self.blocked = False
        self.channel = 1
        self.pmk = None
        self.peers = {}
        self.sent = []
        self.tx_pending = False
        self.tx_answer = None
        self.air = []
        self.restarted = None

    def ticks_ms(self):
        return self.now

    def ticks_add(self, ticks, delta):
        return ticks + delta

    def ticks_diff(self, end, start):
        return end - start

    def ticks_us32(self):
        return (self.now * 1000) & 0xFFFFFFFF

    def serial_read(self):
        if self.trickle and self.incoming:
            return self.incoming.pop(0)
        data = b"".join(self.incoming)
        self.incoming = []
        return data or None

    def serial_write(self, data):
        if self.blocked:
            return 0
        self.written.extend(data)
        return len(data)

    def serial_drain(self):
        pass

    def wait(self, timeout_ms, want_write, tx_busy):
        if self.blocked and want_write:
            raise AssertionError("the dongle waits for a line that never frees")

    def restart(self, reason):
        self.restarted = reason
        raise Restarted()

    def radio_mac(self):
        return DONGLE_MAC

    def radio_limits(self):
        return (1, 250, 19, 6)

    def radio_channel(self):
        return self.channel

    def radio_set_channel(self, channel):
        if channel > 13:
            raise OSError(22, "ESP_ERR_WIFI_ARG")
        self.channel = channel

    def radio_set_pmk(self, pmk):
        self.pmk = pmk

    def radio_add_peer(self, mac, channel, encrypt, lmk):
        self.peers[mac] = (channel, encrypt, lmk)

    def radio_del_peer(self, mac):
        del self.peers[mac]

    def radio_send(self, mac, data):
        self.sent.append((mac, data))
        self.tx_pending = True

    def radio_tx_result(self):
        if self.tx_pending and self.tx_answer is not None:
            self.tx_pending = False
            answer = self.tx_answer
            self.tx_answer = None
            return answer
        return None

    def radio_recv(self):
        if self.air:
            return self.air.pop(0)
        return None

    def radio_dropped(self):
        return 0

    def take(self):
        out = bytes(self.written)
        self.written = bytearray()
        return out


def frame(kind, seq, payload):
    return bytes(core.encode_frame(1, kind, seq, payload))


def resp(seq, status):
    return frame(core.RESP, seq, bytes((status,)))


def split_frames(data):
    """The frames of a stream, each with its delimiter; a lone delimiter is its own entry."""
    out = []
    start = 0
    while start < len(data):
        end = data.find(b"\x00", start)
        out.append(data[start : end + 1])
        start = end + 1
    return out


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = []

    def equal(self, name, got, want):
        if got == want:
            self.passed += 1
        else:
            self.failed.append("%s: got %r, want %r" % (name, got, want))

    def true(self, name, condition):
        self.equal(name, bool(condition), True)


def session(checks, vectors):
    """The document's examples as one session, in its order."""
    hal = FakeHal()
    dongle = core.Dongle(hal, core.POWER_ON)
    dongle.step()
    checks.equal("BOOT after a lone delimiter", hal.take(), b"\x00" + vectors["boot"])

    def request(name, vector):
        hal.incoming.append(vector)
        dongle.step()
        return hal.take()

    checks.equal("HELLO answered by INFO", request("hello", vectors["hello"]), vectors["info"])
    checks.equal("SET_CHANNEL 6", request("set_channel", vectors["set_channel"]), vectors["resp"])
    checks.equal("radio on channel 6", hal.channel, 6)
    checks.equal("SET_PMK", request("set_pmk", vectors["set_pmk"]), resp(3, core.OK))
    checks.equal("PMK given to the radio", hal.pmk, b"pmk-of-site-1-16")
    checks.equal("ADD_PEER", request("add_peer", vectors["add_peer"]), resp(4, core.OK))
    checks.equal(
        "peer in the radio", hal.peers.get(GW_B), (0, True, b"lmk-of-gw-b-0016")
    )
    checks.equal(
        "DEL_PEER of an unknown peer",
        request("del_peer", vectors["del_peer"]),
        resp(5, core.UNKNOWN_PEER),
    )
    checks.equal("SEND accepted", request("send", vectors["send"]), resp(6, core.OK))
    checks.equal(
        "SEND on the air",
        hal.sent,
        [(GW_B, b"\x93\x01\x00\x00\x2a\x00\xc3\xff")],
    )
    hal.tx_answer = True
    dongle.step()
    checks.equal("TX_DONE", hal.take(), vectors["tx_done"])
    hal.air.append((GW_C, core.BROADCAST, -42, 6, 12345678, b"\x93\x02\x00\xc2\x00\x10"))
    dongle.step()
    checks.equal("RX", hal.take(), vectors["rx"])
    # Two refused SENDs and a damaged frame, for the STATS example's counters.
    hal.incoming.append(frame(core.SEND, 40, GW_D + b"\x01\x00\x55"))
    hal.incoming.append(frame(core.SEND, 41, GW_B + b"\x00\x00"))
    damaged = bytearray(vectors["ping"])
    damaged[3] ^= 0x01
    hal.incoming.append(bytes(damaged))
    dongle.step()
    checks.equal(
        "SEND to an unknown peer, empty SEND, damaged PING",
        hal.take(),
        resp(40, core.UNKNOWN_PEER) + resp(41, core.BAD_ARGUMENT),
    )
    hal.now += 1000
    dongle.step()
    checks.equal("STATS a second after BOOT", hal.take(), vectors["stats"])
    dongle.log(core.LOG_INFO, "peer added")
    dongle.step()
    checks.equal("LOG", hal.take(), vectors["log"])
    checks.equal("PING", request("ping", vectors["ping"]), resp(8, core.OK))

    # Credits: the radio keeps the first frame; 8 SENDs fill the queue, the 9th is refused.
    for seq in range(100, 108):
        hal.incoming.append(frame(core.SEND, seq, GW_B + b"\x01\x00\x55"))
    dongle.step()
    accepted = hal.take()
    checks.equal(
        "8 SENDs accepted",
        accepted,
        b"".join([resp(seq, core.OK) for seq in range(100, 108)]),
    )
    checks.equal(
        "NO_CREDIT", request("send", frame(core.SEND, 7, GW_B + b"\x01\x00\x55")), vectors["resp_no_credit"]
    )
    hal.tx_answer = False
    dongle.step()
    out = split_frames(hal.take())
    checks.equal(
        "TX_DONE of a unicast not acknowledged",
        out,
        [frame(core.TX_DONE, 5, b"\x64\x00" + GW_B + b"\x00")],
    )

    try:
        request("reset", vectors["reset"])
        checks.true("RESET restarts", False)
    except Restarted:
        checks.equal("RESET restarts the dongle for the host", hal.restarted, core.HOST_REQUEST)
    checks.equal("RESET answered before the restart", hal.take(), resp(9, core.OK))


def errors(checks, vectors):
    """Section 3.6 and 5: what a dongle answers to bad frames, and what it does not."""
    hal = FakeHal()
    dongle = core.Dongle(hal, core.HOST_REQUEST)
    dongle.step()
    checks.equal(
        "BOOT HOST_REQUEST", hal.take(), b"\x00" + frame(core.BOOT, 0, b"\x01\x01\x00")
    )

    def answer(data):
        hal.incoming.append(data)
        dongle.step()
        return hal.take()

    checks.equal("unknown kind", answer(frame(0x42, 3, b"\x01")), resp(3, core.UNKNOWN_KIND))
    checks.equal(
        "a dongle kind sent to the dongle", answer(frame(core.RX, 4, b"")), resp(4, core.UNKNOWN_KIND)
    )
    checks.equal("HELLO too short", answer(frame(core.HELLO, 5, b"\x01")), resp(5, core.MALFORMED))
    checks.equal("PING with a payload", answer(frame(core.PING, 6, b"\x00")), resp(6, core.MALFORMED))
    checks.equal(
        "ADD_PEER flag 2",
        answer(frame(core.ADD_PEER, 7, GW_B + b"\x00\x02" + bytes(16))),
        resp(7, core.MALFORMED),
    )
    checks.equal(
        "ADD_PEER channel 15",
        answer(frame(core.ADD_PEER, 8, GW_B + b"\x0f\x00" + bytes(16))),
        resp(8, core.BAD_ARGUMENT),
    )
    checks.equal(
        "ADD_PEER multicast",
        answer(frame(core.ADD_PEER, 9, b"\x01\x00\x5e\x00\x00\x01\x00\x00" + bytes(16))),
        resp(9, core.BAD_ARGUMENT),
    )
    checks.equal(
        "ADD_PEER broadcast encrypted",
        answer(frame(core.ADD_PEER, 10, core.BROADCAST + b"\x00\x01" + bytes(16))),
        resp(10, core.BAD_ARGUMENT),
    )
    checks.equal(
        "ADD_PEER broadcast in the clear",
        answer(frame(core.ADD_PEER, 11, core.BROADCAST + b"\x00\x00" + bytes(16))),
        resp(11, core.OK),
    )
    checks.equal(
        "DEL_PEER broadcast", answer(frame(core.DEL_PEER, 12, core.BROADCAST)), resp(12, core.BAD_ARGUMENT)
    )
    checks.equal("SET_CHANNEL 0", answer(frame(core.SET_CHANNEL, 13, b"\x00")), resp(13, core.BAD_ARGUMENT))
    refused = split_frames(answer(frame(core.SET_CHANNEL, 14, b"\x0e")))
    checks.equal("SET_CHANNEL 14 refused by the radio", refused[0], resp(14, core.RADIO_ERROR))
    checks.equal("and logged", [core.decode_frame(f[:-1])[1] for f in refused[1:]], [core.LOG])
    checks.equal(
        "SEND length field disagrees",
        answer(frame(core.SEND, 15, GW_B + b"\x02\x00\x55")),
        resp(15, core.MALFORMED),
    )
    checks.equal(
        "SEND of 251 bytes",
        answer(frame(core.SEND, 16, core.BROADCAST + b"\xfb\x00" + b"\x55" * 251)),
        resp(16, core.PAYLOAD_TOO_LARGE),
    )
    # Damaged frames are never answered, whatever they looked like.
    checks.equal("garbage", answer(b"\x13\x37\xff\x00\x00\x00"), b"")
    checks.equal("too short", answer(b"\x03\x01\x02\x00"), b"")
    oversize = b"\x55" * (core.MAX_ENCODED + 40)
    checks.equal(
        "a run over MAX_ENCODED, then a PING",
        answer(oversize + b"\x00" + frame(core.PING, 17, b"")),
        resp(17, core.OK),
    )
    checks.equal("its buffer stayed bounded", len(dongle.deframer.buffer), 0)
    # A HELLO of protocol 2 still learns who we are; anything else of protocol 2 is dropped.
    info = core.decode_frame(answer(bytes(core.encode_frame(2, core.HELLO, 18, b"\x02\x00")))[:-1])
    checks.equal("HELLO of another major answered by INFO of ours", info[:3], (1, core.INFO, 18))
    checks.equal("PING of another major", answer(bytes(core.encode_frame(2, core.PING, 19, b""))), b"")
    # Byte by byte, the same frames come out.
    ping = frame(core.PING, 20, b"")
    hal.trickle = True
    for byte in ping:
        hal.incoming.append(bytes((byte,)))
    for _ in range(len(ping)):
        dongle.step()
    checks.equal("PING fed byte by byte", hal.take(), resp(20, core.OK))


def congestion(checks):
    """Section 7.4: a line that cannot keep up loses LOG first, then RX; never answers."""
    hal = FakeHal()
    dongle = core.Dongle(hal, core.POWER_ON)
    dongle.step()
    hal.take()
    hal.incoming.append(frame(core.ADD_PEER, 1, GW_B + b"\x00\x00" + bytes(16)))
    dongle.step()
    hal.take()
    hal.blocked = True
    dongle.log(core.LOG_INFO, "a line to lose")
    for index in range(60):
        hal.air.append((GW_C, DONGLE_MAC, -60, 1, index, b"\x77" * 200))
    hal.incoming.append(frame(core.SEND, 2, GW_B + b"\x01\x00\x55"))
    hal.incoming.append(frame(core.PING, 3, b""))
    for _ in range(8):
        dongle.step()
    hal.tx_answer = True
    dongle.step()
    hal.blocked = False
    dongle.step()
    frames = split_frames(hal.take())
    kinds = [core.decode_frame(f[:-1])[1] for f in frames]
    checks.true("some RX dropped", dongle.rx_dropped > 0)
    checks.equal("RX written up to the budget", kinds.count(core.RX) + dongle.rx_dropped, 60)
    checks.true("the queued LOG went first", core.LOG not in kinds and dongle.logs_dropped == 1)
    checks.equal("both answers kept", kinds.count(core.RESP), 2)
    checks.equal("TX_DONE kept", kinds.count(core.TX_DONE), 1)
    seqs = [core.decode_frame(f[:-1])[2] for f in frames if core.decode_frame(f[:-1])[1] != core.RESP]
    checks.equal("own frames numbered without gaps", seqs, list(range(1, 1 + len(seqs))))
    dongle.step()
    logged = [core.decode_frame(f[:-1]) for f in split_frames(hal.take())]
    checks.true(
        "the drop is logged once the line is free",
        len(logged) == 1 and logged[0][1] == core.LOG and b"RX frames dropped" in logged[0][3],
    )


def framing(checks):
    checks.equal("CRC-16/KERMIT check value", core.crc16_kermit(b"123456789"), 0x2189)
    checks.equal(
        "COBS worked example",
        bytes(core.cobs_encode(hexbytes("11 22 00 33 00 00 44"))),
        hexbytes("03 11 22 02 33 01 02 44"),
    )
    run = bytes(range(1, 255))
    checks.equal("COBS of 254 non-zero bytes", bytes(core.cobs_encode(run)), b"\xff" + run + b"\x01")
    checks.equal("COBS decodes a frame ending after 0xff", bytes(core.cobs_decode(b"\xff" + run)), run)
    for data in (b"", b"\x00", b"\x00\x00", bytes(range(256)), b"\xff" * 600):
        checks.equal("COBS round trip of %d bytes" % len(data), bytes(core.cobs_decode(core.cobs_encode(data))), data)
    checks.equal("COBS refuses a code past the end", core.cobs_decode(b"\x05\x01"), None)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "docs/dongle-protocol.md"
    vectors = examples(path)
    checks = Checks()
    framing(checks)
    session(checks, vectors)
    errors(checks, vectors)
    congestion(checks)
    for failure in checks.failed:
        print("FAILED " + failure)
    print("%d passed, %d failed" % (checks.passed, len(checks.failed)))
    if checks.failed:
        sys.exit(1)


main()
