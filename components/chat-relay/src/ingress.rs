//! The relay's ingress lane: a thread of its own, with a single-threaded runtime, for what
//! comes in to be fanned out: the platform's pushes on the internal listener and the Redis
//! bus (and the room deliveries they schedule).
//!
//! On the runtime that writes to the sockets, a push arriving just after a hot room's
//! delivery waits behind that delivery's thousands of socket writes: the platform's request
//! holds its instance meanwhile, and a push that waits past the platform's timeout is an
//! event no viewer sees. On the lane it waits for nothing but other pushes, and the
//! deliveries it triggers queue to the sockets from here.

use std::sync::{Arc, Mutex};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// A handle on the lane; clones share it. The thread ends at [`Lane::stop`] or when the
/// last clone is dropped, and with it every task still on it.
#[derive(Clone)]
pub struct Lane(Arc<Inner>);

struct Inner {
    handle: Handle,
    stop: Mutex<Option<oneshot::Sender<()>>>,
}

impl Lane {
    /// Starts the lane's thread.
    pub fn start() -> std::io::Result<Lane> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("relay-ingress".into())
            .spawn(move || {
                // Runs the lane's tasks until stopped; dropping the runtime drops the rest.
                let _ = runtime.block_on(stopped);
            })?;
        Ok(Lane(Arc::new(Inner {
            handle,
            stop: Mutex::new(Some(stop)),
        })))
    }

    /// Where the lane's tasks are spawned.
    pub fn handle(&self) -> &Handle {
        &self.0.handle
    }

    /// Ends the lane's thread and drops its tasks.
    pub fn stop(&self) {
        self.0.stop.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tasks_run_on_the_lane_thread_until_it_stops() {
        let lane = Lane::start().unwrap();
        let name = lane
            .handle()
            .spawn(async { std::thread::current().name().map(str::to_string) })
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("relay-ingress"));

        let pending = lane.handle().spawn(std::future::pending::<()>());
        lane.stop();
        let ended = tokio::time::timeout(std::time::Duration::from_secs(5), pending)
            .await
            .expect("a stopped lane drops its tasks");
        assert!(ended.unwrap_err().is_cancelled());
    }

    /// A push is answered while every thread of the runtime that serves the sockets is
    /// busy: the internal listener does not wait for them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pushes_are_answered_while_the_socket_runtime_is_busy() {
        use std::io::{Read, Write};
        use std::time::{Duration, Instant};

        let relay = crate::Relay::new(crate::Config::new("http://127.0.0.1:9", "jwt", "push"));
        let public = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let internal = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = crate::serve(relay, public, internal).unwrap();
        let at = server.internal_addr();

        // Both worker threads blocked for 3 s, as a hot room's writes would keep them.
        let busy: Vec<_> = (0..2)
            .map(|_| tokio::spawn(async { std::thread::sleep(Duration::from_secs(3)) }))
            .collect();
        tokio::task::yield_now().await;
        let push = std::thread::spawn(move || {
            let started = Instant::now();
            let mut socket = std::net::TcpStream::connect(at).unwrap();
            socket
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            let body = r#"{"kind":"viewer_count","count":1}"#;
            let stream = "0f8fad5b-d9cb-469f-a165-70867728950e";
            write!(
                socket,
                "POST /internal/streams/{stream}/events HTTP/1.1\r\nhost: relay\r\n\
                 x-relay-secret: push\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            let mut answer = [0u8; 12];
            let read = socket.read_exact(&mut answer);
            (read.map(|_| answer), started.elapsed())
        });
        let (answer, took) = push.join().unwrap();
        let answer = answer.expect("the push is answered while the workers are busy");
        assert_eq!(&answer, b"HTTP/1.1 202");
        assert!(took < Duration::from_secs(2), "answered after {took:?}");
        for task in busy {
            task.await.unwrap();
        }
        server.shutdown().await;
    }
}
