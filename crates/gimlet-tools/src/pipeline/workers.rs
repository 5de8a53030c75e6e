//! The threads calls run on ([`super::run_on_worker`]): a pool of plain threads, each idle one
//! parked on its own slot.
//!
//! Tokio's blocking pool would do, but its hand-off is dear where system calls are: it wakes
//! a thread while holding the pool's lock, so the woken thread sleeps again on that lock
//! before it runs (about five futex calls per call, measured). Here the caller takes an idle
//! thread off a list, puts the job in its slot and unparks it: one futex wake, and the
//! thread's one futex wait. Threads start on demand and leave after a while idle, as Tokio's
//! do.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Runs `job` on a thread of the process-wide pool (see [`Pool::spawn`]).
pub(super) fn spawn(job: impl FnOnce() + Send + 'static) {
    static POOL: OnceLock<Pool> = OnceLock::new();
    // Threads idle for 10 s leave (as Tokio's do); a burst of calls must not grow hundreds
    // of threads, so at most 64, and further calls wait for one of them.
    POOL.get_or_init(|| Pool::new(Duration::from_secs(10), 64))
        .spawn(Box::new(job));
}

/// A pool of threads for blocking jobs.
pub(super) struct Pool {
    state: Mutex<State>,
    /// How long an idle thread waits for work before it ends.
    keep_alive: Duration,
    /// At most this many threads; further jobs wait in the queue.
    max_threads: usize,
}

/// An idle thread's mailbox.
struct Slot {
    job: Mutex<Option<Job>>,
    thread: Thread,
}

#[derive(Default)]
struct State {
    /// Parked threads waiting for a job; the most recently idle last (its caches are warm).
    idle: Vec<Arc<Slot>>,
    /// Jobs waiting for a thread: no thread was idle, and one is starting or all are busy.
    queue: VecDeque<Job>,
    threads: usize,
}

impl Pool {
    pub(super) fn new(keep_alive: Duration, max_threads: usize) -> Self {
        Self {
            state: Mutex::default(),
            keep_alive,
            max_threads,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `job` on an idle thread if there is one, else on a new one, else (at the limit)
    /// on the first thread to become free. A job that can never run (no thread can be
    /// started at all) is dropped, which its caller sees as a closed channel.
    pub(super) fn spawn(&'static self, job: Job) {
        let mut state = self.lock();
        if let Some(slot) = state.idle.pop() {
            drop(state);
            *slot.job.lock().unwrap_or_else(PoisonError::into_inner) = Some(job);
            slot.thread.unpark();
            return;
        }
        state.queue.push_back(job);
        if state.threads >= self.max_threads {
            return;
        }
        state.threads += 1;
        drop(state);
        let started = std::thread::Builder::new()
            .name(String::from("gimlet-call"))
            .spawn(|| self.work());
        if let Err(err) = started {
            let mut state = self.lock();
            state.threads -= 1;
            if state.threads == 0 {
                tracing::error!("cannot start a thread for a call: {err}");
                state.queue.clear();
            } else {
                tracing::warn!("cannot start a thread for a call ({err}); it waits for a free one");
            }
        }
    }

    /// A pool thread: runs jobs until it has been idle for `keep_alive`.
    fn work(&self) {
        let slot = Arc::new(Slot {
            job: Mutex::new(None),
            thread: std::thread::current(),
        });
        while let Some(job) = self.next_job(&slot) {
            // A panic is the job's own business (the pipeline catches tools' panics); the
            // thread stays.
            if std::panic::catch_unwind(AssertUnwindSafe(job)).is_err() {
                tracing::error!("a job panicked on a call thread");
            }
        }
    }

    /// The next job: a queued one at once, else one put in `slot`. `None` when the thread
    /// has been idle for `keep_alive` and has left the pool.
    fn next_job(&self, slot: &Arc<Slot>) -> Option<Job> {
        {
            let mut state = self.lock();
            if let Some(job) = state.queue.pop_front() {
                return Some(job);
            }
            state.idle.push(Arc::clone(slot));
        }
        let idle_since = Instant::now();
        loop {
            if let Some(job) = slot
                .job
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
            {
                return Some(job);
            }
            if let Some(left) = self.keep_alive.checked_sub(idle_since.elapsed()) {
                std::thread::park_timeout(left);
                continue;
            }
            let mut state = self.lock();
            if let Some(at) = state.idle.iter().position(|s| Arc::ptr_eq(s, slot)) {
                state.idle.remove(at);
                state.threads -= 1;
                return None;
            }
            // Taken off the list by a caller that is putting a job in the slot: wait for it.
            drop(state);
            std::thread::park();
        }
    }

    #[cfg(test)]
    fn threads(&self) -> (usize, usize) {
        let state = self.lock();
        (state.threads, state.idle.len())
    }
}

#[cfg(test)]
#[path = "workers_tests.rs"]
mod tests;
