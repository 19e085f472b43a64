# conclave reference dongle: the host HAL (CPython on Linux only).
#
# Runs conclave_dongle.py unchanged on a PC, so that the Rust driver and whole gateways can be
# tested against the firmware's real protocol logic:
#
# - the serial side is a pseudo-terminal the HAL creates itself; the gateway opens its slave
#   path (or a symbolic link to it, --link) with tokio-serial exactly as it opens /dev/ttyACM0.
#   The HAL keeps the master and never opens the slave, so the host sees end of file when the
#   process dies (kill -9 is a dongle unplugged), and a host that closes and reopens the port
#   finds the dongle still there. While no host has the slave open, what the dongle writes is
#   dropped, as a USB-serial bridge drops bytes nobody reads.
# - the radio side is a simulated air shared by every firmware process given the same
#   --air GROUP:PORT: UDP multicast on the loopback interface (TTL 0: it never leaves the
#   machine). ESP-NOW's rules are kept: 250-byte payloads, 20 peers of which one is the
#   broadcast peer and at most 6 encrypted, broadcast never encrypted and always "sent",
#   unicast acknowledged by the receiver (retried, then ok 0 when nobody answers), frames
#   heard only on the receiver's channel, encrypted frames only by a receiver holding the
#   sender as a peer with the same PMK and LMK. Loss (--loss) and RSSI (--rssi,
#   --rssi-jitter) are the receiver's, drawn from a seeded generator (--seed).
# - SIGUSR1 restarts the dongle as its watchdog would (BOOT reason WATCHDOG); --boot-text
#   makes every start print an ESP32 ROM banner first, the garbage a real board sends.

import errno
import fcntl
import os
import random
import select
import signal
import socket
import struct
import termios
import time
import tty
import zlib

import conclave_dongle as core

# Linux's ioctls to unlock a pseudo-terminal and learn its number (asm-generic values; the
# termios module has them on most builds).
TIOCGPTN = getattr(termios, "TIOCGPTN", 0x80045430)
TIOCSPTLCK = getattr(termios, "TIOCSPTLCK", 0x40045431)

# ESP-NOW's limits (ESP-IDF esp_now.h; MicroPython's espnow documentation for encryption).
ESPNOW_MAX_DATA = 250
ESPNOW_TOTAL_PEERS = 20
MICROPYTHON_ENCRYPTED_PEERS = 6
# ESP-IDF's default primary master key, in force until SET_PMK.
DEFAULT_PMK = b"pmk1234567890123"
# Frames the radio buffers for the firmware, like MicroPython's espnow receive buffer.
RADIO_RX_FRAMES = 32
# How often a dongle whose host has closed the port looks whether it came back.
HOST_POLL_S = 0.02

_MAGIC = b"cnA1"
_DATA = 0
_ACK = 1
# magic, type, channel, src, dst, txid, encrypted, key fingerprint
_HEADER = struct.Struct("<4sBB6s6sIBI")

BOOT_TEXT = (
    b"ets Jul 29 2019 12:21:46\r\n\r\n"
    b"rst:0x1 (POWERON_RESET),boot:0x13 (SPI_FAST_FLASH_BOOT)\r\n"
    b"configsip: 0, SPIWP:0xee\r\n"
    b"mode:DIO, clock div:2\r\n"
    b"load:0x3fff0030,len:4540\r\n"
    b"entry 0x40080680\r\n"
)


class Restart(Exception):
    """Raised out of the dongle's loop when it restarts; the runner boots it again."""

    def __init__(self, reason):
        Exception.__init__(self, reason)
        self.reason = reason


def _radio_error(code, name):
    # The shape of MicroPython's espnow errors: OSError(errno, "ESP_ERR_...").
    return OSError(code, name)


class Pty:
    """The master of a pseudo-terminal, raw and non-blocking. See the module comment."""

    def __init__(self, link):
        fd = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        fcntl.ioctl(fd, TIOCSPTLCK, struct.pack("i", 0))
        number = struct.unpack("I", fcntl.ioctl(fd, TIOCGPTN, b"\0\0\0\0"))[0]
        # Raw before anything is written: a new terminal echoes and translates line ends. On
        # Linux the master's termios is the slave's, so the host starts from raw too.
        tty.setraw(fd, termios.TCSANOW)
        self.fd = fd
        self.slave = "/dev/pts/%d" % number
        self.link = link
        self.host_away = False
        self.retry_at = 0.0
        if link:
            temporary = "%s.%d.tmp" % (link, os.getpid())
            if os.path.lexists(temporary):
                os.unlink(temporary)
            os.symlink(self.slave, temporary)
            os.rename(temporary, link)

    def close(self):
        if self.link:
            try:
                if os.readlink(self.link) == self.slave:
                    os.unlink(self.link)
            except OSError:
                pass
        os.close(self.fd)

    def _left(self):
        # No host has the slave open (it closed it): reads fail with EIO and poll reports a
        # hang-up for as long as that lasts, so look again every HOST_POLL_S instead.
        self.host_away = True
        self.retry_at = time.monotonic() + HOST_POLL_S

    def read(self):
        if self.host_away and time.monotonic() < self.retry_at:
            return None
        try:
            data = os.read(self.fd, 4096)
        except BlockingIOError:
            self.host_away = False
            return None
        except OSError as err:
            if err.errno == errno.EIO:
                self._left()
                return None
            raise
        self.host_away = False
        return data or None

    def write(self, data):
        if self.host_away:
            return len(data)
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0
        except OSError as err:
            if err.errno == errno.EIO:
                self._left()
                return len(data)
            raise


class Air:
    """This dongle's radio on the shared simulated air. See the module comment."""

    def __init__(self, group, port):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((group, port))
        loopback = socket.inet_aton("127.0.0.1")
        sock.setsockopt(
            socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(group) + loopback
        )
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, loopback)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.setblocking(False)
        self.sock = sock
        self.address = (group, port)

    def send(self, datagram):
        try:
            self.sock.sendto(datagram, self.address)
        except BlockingIOError:
            # A full socket buffer is a frame lost on the air.
            pass

    def receive(self):
        try:
            return self.sock.recv(65536)
        except BlockingIOError:
            return None


def parse_mac(text):
    parts = text.split(":")
    if len(parts) != 6:
        raise ValueError("%r is not a MAC address (six hex bytes with colons)" % text)
    return bytes(int(part, 16) for part in parts)


class Hal:
    """The HAL of conclave_dongle.py on a PC. `options` is the namespace of host_dongle.py."""

    def __init__(self, options):
        self.options = options
        self.mac = parse_mac(options.mac)
        self.tx_credits = options.tx_credits
        self.output_budget = options.output_budget
        self.stats_period_ms = options.stats_ms
        self.firmware_text = options.firmware_text or (
            "conclave-dongle-py %s host" % core.VERSION
        )
        self.rng = random.Random(options.seed)
        self.pty = Pty(options.link)
        group, _, port = options.air.rpartition(":")
        self.air = Air(group, int(port))
        self.txid = self.rng.getrandbits(32)
        self.restart_reason = None
        # A signal only sets a flag; the wake-up socket makes the loop's select see it at once.
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._wake_write.setblocking(False)
        signal.set_wakeup_fd(self._wake_write.fileno())
        signal.signal(signal.SIGUSR1, self._on_sigusr1)
        # --exit-with-parent: a test harness killed before it could stop its dongles must not
        # leave them running; the parent's death shows as a new parent process.
        self.parent = os.getppid() if options.exit_with_parent else None
        self.parent_checked = time.monotonic()
        self.boot()

    def _on_sigusr1(self, signum, frame):
        self.restart_reason = core.WATCHDOG

    def boot(self):
        """What a restart does to the radio (section 8): default channel, only the broadcast
        peer, the default PMK, nothing in the air or in its buffer."""
        self.boot_ns = time.monotonic_ns()
        self.channel = core.DEFAULT_CHANNEL
        self.pmk = DEFAULT_PMK
        # mac -> (channel, encrypt, key fingerprint)
        self.peers = {core.BROADCAST: (0, False, 0)}
        self.rx_frames = []
        self.rx_overflow = 0
        self.last_txid = {}
        self.in_air = None
        self.tx_result = None
        if self.options.boot_text:
            self.pty.write(BOOT_TEXT)

    def close(self):
        self.pty.close()

    # -- clock ------------------------------------------------------------------------------

    def ticks_ms(self):
        return time.monotonic_ns() // 1000000

    def ticks_add(self, ticks, delta):
        return ticks + delta

    def ticks_diff(self, end, start):
        return end - start

    def ticks_us32(self):
        return ((time.monotonic_ns() - self.boot_ns) // 1000) & 0xFFFFFFFF

    # -- serial -----------------------------------------------------------------------------

    def serial_read(self):
        return self.pty.read()

    def serial_write(self, data):
        return self.pty.write(data)

    def serial_drain(self):
        # Written bytes are in the kernel's terminal buffer and survive the restart.
        pass

    def restart(self, reason):
        raise Restart(reason)

    def wait(self, timeout_ms, want_write, tx_busy):
        if self.restart_reason is not None:
            self._restart_now()
        if self.parent is not None and time.monotonic() - self.parent_checked >= 1.0:
            self.parent_checked = time.monotonic()
            if os.getppid() != self.parent:
                self.close()
                os._exit(0)
        timeout = timeout_ms / 1000.0
        if self.in_air is not None:
            timeout = min(timeout, max(0.0, self.in_air[3] - time.monotonic()))
        if self.tx_result is not None or self.rx_frames:
            timeout = 0.0
        readable = [self.air.sock, self._wake_read]
        writable = []
        if self.pty.host_away:
            timeout = min(timeout, max(0.0, self.pty.retry_at - time.monotonic()))
        else:
            readable.append(self.pty.fd)
            if want_write:
                writable.append(self.pty.fd)
        select.select(readable, writable, [], timeout)
        try:
            while self._wake_read.recv(64):
                pass
        except BlockingIOError:
            pass
        if self.restart_reason is not None:
            self._restart_now()

    def _restart_now(self):
        reason = self.restart_reason
        self.restart_reason = None
        raise Restart(reason)

    # -- radio ------------------------------------------------------------------------------

    def radio_mac(self):
        return self.mac

    def radio_limits(self):
        return (1, ESPNOW_MAX_DATA, self.options.max_peers, self.options.max_encrypted)

    def radio_channel(self):
        return self.channel

    def radio_set_channel(self, channel):
        if channel > self.options.channels:
            raise _radio_error(errno.EINVAL, "ESP_ERR_WIFI_ARG")
        self.channel = channel

    def radio_set_pmk(self, pmk):
        self.pmk = bytes(pmk)

    def radio_add_peer(self, mac, channel, encrypt, lmk):
        mac = bytes(mac)
        if mac == core.BROADCAST and encrypt:
            raise _radio_error(errno.EINVAL, "ESP_ERR_ESPNOW_ARG")
        old = self.peers.get(mac)
        if old is None and len(self.peers) >= ESPNOW_TOTAL_PEERS:
            raise _radio_error(errno.ENOSPC, "ESP_ERR_ESPNOW_FULL")
        if encrypt and not (old and old[1]):
            encrypted = sum(1 for peer in self.peers.values() if peer[1])
            if encrypted >= MICROPYTHON_ENCRYPTED_PEERS:
                raise _radio_error(errno.ENOSPC, "ESP_ERR_ESPNOW_FULL")
        # The radio derives the peer's key from the PMK in force now (section 5.6).
        fingerprint = zlib.crc32(self.pmk + bytes(lmk)) if encrypt else 0
        self.peers[mac] = (channel, encrypt, fingerprint)

    def radio_del_peer(self, mac):
        mac = bytes(mac)
        if mac not in self.peers:
            raise _radio_error(errno.ENOENT, "ESP_ERR_ESPNOW_NOT_FOUND")
        del self.peers[mac]

    def radio_send(self, mac, data):
        mac = bytes(mac)
        if len(data) > ESPNOW_MAX_DATA:
            raise _radio_error(errno.EINVAL, "ESP_ERR_ESPNOW_ARG")
        peer = self.peers.get(mac)
        if peer is None:
            raise _radio_error(errno.ENOENT, "ESP_ERR_ESPNOW_NOT_FOUND")
        if peer[0] not in (0, self.channel):
            raise _radio_error(errno.EINVAL, "ESP_ERR_ESPNOW_CHAN")
        self.txid = (self.txid + 1) & 0xFFFFFFFF
        encrypted = 1 if peer[1] else 0
        datagram = (
            _HEADER.pack(
                _MAGIC, _DATA, self.channel, self.mac, mac, self.txid, encrypted, peer[2]
            )
            + data
        )
        self.air.send(datagram)
        if mac == core.BROADCAST:
            self.tx_result = True
            return
        attempts = max(1, self.options.attempts)
        timeout = self.options.ack_timeout_ms / 1000.0
        self.in_air = [self.txid, datagram, attempts - 1, time.monotonic() + timeout]

    def radio_tx_result(self):
        self._pump_air()
        if self.tx_result is not None:
            result = self.tx_result
            self.tx_result = None
            return result
        frame = self.in_air
        if frame is None or time.monotonic() < frame[3]:
            return None
        if frame[2] > 0:
            # No acknowledgement in time: the radio tries again.
            frame[2] -= 1
            frame[3] = time.monotonic() + self.options.ack_timeout_ms / 1000.0
            self.air.send(frame[1])
            return None
        self.in_air = None
        return False

    def radio_recv(self):
        self._pump_air()
        if self.rx_frames:
            return self.rx_frames.pop(0)
        return None

    def radio_dropped(self):
        return self.rx_overflow

    def _pump_air(self):
        options = self.options
        while True:
            datagram = self.air.receive()
            if datagram is None:
                return
            if len(datagram) < _HEADER.size:
                continue
            magic, kind, channel, src, dst, txid, encrypted, fingerprint = _HEADER.unpack_from(
                datagram
            )
            if magic != _MAGIC or src == self.mac:
                continue
            if kind == _ACK:
                frame = self.in_air
                if dst == self.mac and frame is not None and frame[0] == txid:
                    self.in_air = None
                    self.tx_result = True
                continue
            if channel != self.channel or (dst != self.mac and dst != core.BROADCAST):
                continue
            if options.loss > 0 and self.rng.random() < options.loss:
                continue
            if dst == self.mac:
                ack = _HEADER.pack(_MAGIC, _ACK, channel, self.mac, src, txid, 0, 0)
                self.air.send(ack)
                if self.last_txid.get(src) == txid:
                    # A retry of a frame already received: acknowledged again, kept once.
                    continue
                self.last_txid[src] = txid
            if encrypted:
                peer = self.peers.get(src)
                if peer is None or not peer[1] or peer[2] != fingerprint:
                    # The radio cannot decrypt it: it never reaches the firmware.
                    continue
            if len(self.rx_frames) >= RADIO_RX_FRAMES:
                self.rx_overflow += 1
                continue
            jitter = options.rssi_jitter
            rssi = options.rssi + (self.rng.randint(-jitter, jitter) if jitter else 0)
            rssi = max(-127, min(0, rssi))
            self.rx_frames.append(
                (src, dst, rssi, channel, self.ticks_us32(), datagram[_HEADER.size :])
            )
