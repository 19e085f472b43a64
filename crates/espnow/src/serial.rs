//! The serial line to a dongle (ESP-1): a tty opened with tokio-serial — a real
//! `/dev/ttyACM0` or the slave side of a pseudo-terminal — behind an `AsyncRead + AsyncWrite`
//! that never blocks the executor.
//!
//! tokio-serial's `poll_flush` calls `tcdrain(3)`, a blocking system call that waits until
//! the UART (or, on a pseudo-terminal, the process reading the master side) has taken every
//! byte. On the driver's event loop that stalls every other task of the gateway for as long
//! as the line takes to drain — milliseconds on a USB adapter, and on a pseudo-terminal whose
//! master is served by the same thread (the demo, the tests) until the kernel gives up. Bytes
//! a `write` accepted are already in the kernel's tty buffer and on their way, and the
//! protocol's own acknowledgements (`RESP`, `TX_DONE`) say when the dongle has them, so
//! [`SerialLine`] makes flush a no-op instead.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_serial::{SerialPortBuilderExt, SerialStream};

/// An open serial port whose flush and shutdown return at once (see the module doc).
#[derive(Debug)]
pub struct SerialLine {
    port: SerialStream,
}

impl SerialLine {
    /// Opens `path` at `baud`, 8N1, without flow control. The error names the path.
    pub fn open(path: &str, baud: u32) -> io::Result<Self> {
        let port = tokio_serial::new(path, baud)
            .open_native_async()
            .map_err(|err| {
                let kind = io::Error::from(err.clone()).kind();
                io::Error::new(kind, format!("{path}: {err}"))
            })?;
        Ok(Self { port })
    }
}

impl AsyncRead for SerialLine {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.port).poll_read(cx, buf)
    }
}

impl AsyncWrite for SerialLine {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.port).poll_write(cx, buf)
    }

    /// Written bytes are in the kernel's hands already; waiting for the line to drain would
    /// block the thread (`tcdrain`), so there is nothing to do.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Closing is dropping; like flush, it must not drain the line.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A factory for [`spawn_dongle`](crate::spawn_dongle) that opens a serial port: a real
/// `/dev/ttyACM0` or the slave side of a pseudo-terminal, the same way. Errors name the path.
pub fn open_serial(
    path: &str,
    baud: u32,
) -> impl FnMut() -> std::future::Ready<io::Result<SerialLine>> + Send + 'static {
    let path = path.to_owned();
    move || std::future::ready(SerialLine::open(&path, baud))
}
