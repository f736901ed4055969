//! A socket's outgoing side: the frames waiting for it, and the one place they are written.
//!
//! Whoever has a frame for the socket (its room's writer, its reader answering, its ping
//! timer) hands it to the outbox, which writes it then and there when nothing waits before
//! it and the connection takes it: a hot room's delivery costs one write per socket and
//! wakes no task. Otherwise the frame waits, in order, and the socket's own task
//! ([`Outbox::pump`]) writes the rest when the connection can take more. A socket with
//! `capacity` frames waiting is too slow: it is told to go ([`Outbox::kicked`]).

use bytes::{Buf, Bytes};
use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use tokio::io::AsyncWrite;
use tokio::sync::Notify;

/// The connection's writing half.
pub type Connection = Box<dyn AsyncWrite + Send + Unpin>;

/// What became of a frame handed to the outbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// Written to the connection.
    Written,
    /// Waiting behind others, or for the connection to take more.
    Waiting,
    /// Refused: `capacity` frames were already waiting. The socket was told to go.
    Overflowed,
    /// Refused: the socket is closing or gone.
    Closed,
}

impl Sent {
    pub fn accepted(self) -> bool {
        matches!(self, Sent::Written | Sent::Waiting)
    }
}

/// Why [`Outbox::pump`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pumped {
    /// A last frame (a close) was queued: drain what waits, then end the socket.
    Closing,
    /// The connection failed or the socket was shut.
    Ended,
}

pub struct Outbox {
    state: Mutex<State>,
    /// Woken when the connection can take more, and when frames wait for a connection
    /// that has just been opened.
    writable: Arc<Signal>,
    waker: Waker,
    kick: Notify,
    capacity: usize,
}

struct State {
    /// None until the socket's session opens it, and after it shuts.
    connection: Option<Connection>,
    waiting: VecDeque<Bytes>,
    /// A last frame was queued: nothing is accepted after it.
    closing: bool,
    shut: bool,
}

/// Progress of one attempt to write what waits.
enum Progress {
    Drained,
    Blocked,
    Failed,
}

struct Signal(Notify);

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.0.notify_one();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.notify_one();
    }
}

impl Outbox {
    pub fn new(capacity: usize) -> Outbox {
        let writable = Arc::new(Signal(Notify::new()));
        Outbox {
            waker: Waker::from(writable.clone()),
            writable,
            state: Mutex::new(State {
                connection: None,
                waiting: VecDeque::new(),
                closing: false,
                shut: false,
            }),
            kick: Notify::new(),
            capacity: capacity.max(1),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `frames` (whole WebSocket frames) behind what waits, and writes at once what
    /// the connection takes.
    pub fn send(&self, frames: Bytes) -> Sent {
        let mut state = self.state();
        self.enqueue(&mut state, frames)
    }

    /// Queues `frames` followed by a last frame (a close): nothing is accepted after it,
    /// and [`Outbox::pump`] returns [`Pumped::Closing`].
    pub fn send_last(&self, frames: Option<Bytes>, last: Bytes) -> Sent {
        let mut state = self.state();
        if let Some(frames) = frames {
            let sent = self.enqueue(&mut state, frames);
            if !sent.accepted() {
                return sent;
            }
        }
        let sent = self.enqueue(&mut state, last);
        if sent.accepted() {
            state.closing = true;
            self.writable.0.notify_one();
        }
        sent
    }

    fn enqueue(&self, state: &mut State, frames: Bytes) -> Sent {
        if state.shut || state.closing {
            return Sent::Closed;
        }
        if state.waiting.len() >= self.capacity {
            self.give_up(state);
            return Sent::Overflowed;
        }
        state.waiting.push_back(frames);
        // Frames already waiting mean the pump is on it (or the connection is not open).
        if state.waiting.len() > 1 {
            return Sent::Waiting;
        }
        match self.write_out(state) {
            Progress::Drained => Sent::Written,
            Progress::Blocked => Sent::Waiting,
            Progress::Failed => Sent::Closed,
        }
    }

    /// Writes what waits until the connection takes no more. Registers the outbox's waker
    /// with the connection when it is full, so the pump wakes when it drains.
    fn write_out(&self, state: &mut State) -> Progress {
        let Some(connection) = state.connection.as_mut() else {
            return Progress::Blocked;
        };
        let mut cx = Context::from_waker(&self.waker);
        while let Some(front) = state.waiting.front_mut() {
            match Pin::new(&mut *connection).poll_write(&mut cx, front) {
                Poll::Ready(Ok(n)) if n == front.len() => {
                    state.waiting.pop_front();
                }
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return self.fail(state),
                Poll::Ready(Ok(n)) => front.advance(n),
                Poll::Pending => return Progress::Blocked,
            }
        }
        match Pin::new(&mut *connection).poll_flush(&mut cx) {
            Poll::Ready(Ok(())) => Progress::Drained,
            Poll::Ready(Err(_)) => self.fail(state),
            Poll::Pending => Progress::Blocked,
        }
    }

    fn fail(&self, state: &mut State) -> Progress {
        state.shut = true;
        state.waiting.clear();
        state.connection = None;
        self.writable.0.notify_one();
        Progress::Failed
    }

    /// Opens the connection: `first` goes out before everything that waits.
    pub fn open(&self, connection: Connection, first: Bytes) {
        let mut state = self.state();
        if state.shut {
            return;
        }
        state.waiting.push_front(first);
        state.connection = Some(connection);
        if let Progress::Blocked = self.write_out(&mut state) {
            self.writable.0.notify_one();
        }
    }

    /// Writes what waits whenever the connection can take it. Returns when a last frame
    /// was queued ([`Outbox::drained`] then writes it) or the connection ends.
    pub async fn pump(&self) -> Pumped {
        loop {
            {
                let mut state = self.state();
                if state.shut {
                    return Pumped::Ended;
                }
                if let Progress::Failed = self.write_out(&mut state) {
                    return Pumped::Ended;
                }
                if state.closing {
                    return Pumped::Closing;
                }
            }
            self.writable.0.notified().await;
        }
    }

    /// Returns once everything waiting was written, or the connection failed.
    pub async fn drained(&self) {
        loop {
            {
                let mut state = self.state();
                if state.shut || !matches!(self.write_out(&mut state), Progress::Blocked) {
                    return;
                }
            }
            self.writable.0.notified().await;
        }
    }

    /// Tells the socket to go, too slow: what waits is dropped, nothing more is accepted.
    pub fn overflow(&self) {
        self.give_up(&mut self.state());
    }

    fn give_up(&self, state: &mut State) {
        state.shut = true;
        state.waiting.clear();
        self.kick.notify_one();
    }

    /// Completes when the socket was told to go (it overflowed).
    pub async fn kicked(&self) {
        self.kick.notified().await;
    }

    /// Refuses everything from now on and lets go of the connection and what waits.
    pub fn shut(&self) {
        let mut state = self.state();
        state.shut = true;
        state.waiting.clear();
        state.connection = None;
    }

    /// Frames that may wait before the socket is told to go.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.state().waiting.len()
    }
}

/// A connection as tungstenite sees it when the outbox writes for it: reads come from the
/// socket, and what tungstenite writes itself (pongs, the answer to a client's close) joins
/// the outbox's queue in order.
pub struct ThroughOutbox<R> {
    pub read: R,
    pub outbox: Arc<Outbox>,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for ThroughOutbox<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.read).poll_read(cx, buf)
    }
}

impl<R: Unpin> AsyncWrite for ThroughOutbox<R> {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        // tungstenite hands over whole frames, so they never interleave with the outbox's.
        Poll::Ready(match self.outbox.send(Bytes::copy_from_slice(buf)) {
            sent if sent.accepted() => Ok(buf.len()),
            _ => Err(io::ErrorKind::BrokenPipe.into()),
        })
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// An outbox over one end of a loopback pair with small buffers, and the other end.
    async fn pair(capacity: usize) -> (Arc<Outbox>, tokio::io::DuplexStream) {
        let (ours, theirs) = tokio::io::duplex(64);
        let outbox = Arc::new(Outbox::new(capacity));
        outbox.open(Box::new(ours), Bytes::from_static(b"first;"));
        (outbox, theirs)
    }

    #[tokio::test]
    async fn frames_go_out_in_order_at_once_or_through_the_pump() {
        let (outbox, mut theirs) = pair(64).await;
        // The duplex holds 64 bytes: the first sends are written at once, then they wait.
        let mut expected = b"first;".to_vec();
        let mut sent = Vec::new();
        for n in 0..20 {
            let frame = format!("frame {n:02};");
            expected.extend_from_slice(frame.as_bytes());
            sent.push(outbox.send(Bytes::from(frame)));
        }
        assert_eq!(sent[0], Sent::Written);
        assert_eq!(sent[19], Sent::Waiting);
        let pump = {
            let outbox = outbox.clone();
            tokio::spawn(async move { outbox.pump().await })
        };
        let mut got = vec![0; expected.len()];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expected);
        assert_eq!(outbox.waiting(), 0);
        assert_eq!(
            outbox.send_last(None, Bytes::from_static(b"bye")),
            Sent::Written
        );
        assert_eq!(pump.await.unwrap(), Pumped::Closing);
        assert_eq!(outbox.send(Bytes::from_static(b"late")), Sent::Closed);
    }

    #[tokio::test]
    async fn a_socket_that_does_not_read_overflows_and_is_kicked() {
        let (outbox, _theirs) = pair(4).await;
        let frame = Bytes::from(vec![b'x'; 100]);
        let results: Vec<Sent> = (0..6).map(|_| outbox.send(frame.clone())).collect();
        // The first frame is written in part (64 bytes fit), then four wait: the fifth
        // overflows.
        assert_eq!(results[..4], [Sent::Waiting; 4]);
        assert_eq!(results[4], Sent::Overflowed);
        assert_eq!(results[5], Sent::Closed);
        tokio::time::timeout(std::time::Duration::from_secs(1), outbox.kicked())
            .await
            .expect("told to go");
        assert_eq!(
            outbox.waiting(),
            0,
            "nothing held for a socket that is gone"
        );
    }

    #[tokio::test]
    async fn frames_before_the_connection_opens_follow_its_first() {
        let outbox = Arc::new(Outbox::new(8));
        assert_eq!(outbox.send(Bytes::from_static(b"b;")), Sent::Waiting);
        let (ours, mut theirs) = tokio::io::duplex(1024);
        outbox.open(Box::new(ours), Bytes::from_static(b"a;"));
        let pump = {
            let outbox = outbox.clone();
            tokio::spawn(async move { outbox.pump().await })
        };
        let mut got = [0; 4];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"a;b;");
        outbox.shut();
        drop(theirs);
        assert_eq!(outbox.send(Bytes::from_static(b"c")), Sent::Closed);
        pump.abort();
    }
}
