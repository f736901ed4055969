//! Lingering close, as nginx does it: when a connection is closed while the client is
//! still sending a request body (a body refused with 413 before it was read), the server
//! first shuts its sending side, then reads and discards what keeps arriving for a short
//! while, and only then closes. Closing at once would make the kernel answer the unread
//! data with a reset, and the client would lose the answer it was about to read.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long the rest of a body is read and discarded at most.
pub const LINGER_TIME: Duration = Duration::from_secs(5);
/// How many bytes are discarded at most.
pub const LINGER_BYTES: usize = 32 << 20;

/// A connection whose shutdown lingers (see the module).
pub struct Lingering<S> {
    inner: S,
    /// Set once the sending side is shut: the read-and-discard phase.
    draining: Option<Drain>,
}

struct Drain {
    deadline: Pin<Box<tokio::time::Sleep>>,
    discarded: usize,
}

impl<S> Lingering<S> {
    pub fn new(inner: S) -> Lingering<S> {
        Lingering {
            inner,
            draining: None,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Lingering<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Lingering<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.draining.is_none() {
            // Our side first: the client reads the whole answer, then end of stream.
            match Pin::new(&mut this.inner).poll_shutdown(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
            this.draining = Some(Drain {
                deadline: Box::pin(tokio::time::sleep(LINGER_TIME)),
                discarded: 0,
            });
        }
        let Some(drain) = this.draining.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let mut scratch = [0u8; 16 * 1024];
        loop {
            if drain.deadline.as_mut().poll(cx).is_ready() || drain.discarded >= LINGER_BYTES {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut buf) {
                // The client closed (or failed): nothing more to wait for.
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => drain.discarded += buf.filled().len(),
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn the_client_reads_the_answer_while_still_sending() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut conn = Lingering::new(stream);
            let mut head = [0u8; 16];
            conn.read_exact(&mut head).await.unwrap();
            // Answer and close without reading the body.
            conn.write_all(b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\n\r\n")
                .await
                .unwrap();
            conn.shutdown().await.unwrap();
        });
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        client.write_all(b"PUT / HTTP/1.1\r\n").await.unwrap();
        // A large body, sent whole although the server refuses it.
        let body = vec![b'x'; 4 << 20];
        let sent = client.write_all(&body).await;
        assert!(sent.is_ok(), "the body was taken, not reset: {sent:?}");
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        drop(client);
        server.await.unwrap();
    }
}
