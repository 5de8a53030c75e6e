use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::Pool;

const WAIT: Duration = Duration::from_secs(20);

fn pool(keep_alive: Duration, max_threads: usize) -> &'static Pool {
    Box::leak(Box::new(Pool::new(keep_alive, max_threads)))
}

/// Waits until `check` holds, or fails after [`WAIT`].
#[expect(clippy::disallowed_methods, reason = "plain threads: there is no runtime here")]
fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn jobs_run_side_by_side_on_threads_of_their_own() {
    let pool = pool(Duration::from_secs(10), 8);
    let started: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
    let (done, finished) = mpsc::channel();
    for _ in 0..4 {
        let done = done.clone();
        pool.spawn(Box::new(move || {
            started.fetch_add(1, Ordering::SeqCst);
            // Each job waits for all four to have started: run one after another, they
            // would never get there.
            let deadline = Instant::now() + WAIT;
            while started.load(Ordering::SeqCst) < 4 && Instant::now() < deadline {
                std::thread::yield_now();
            }
            done.send(started.load(Ordering::SeqCst)).unwrap();
        }));
    }
    for _ in 0..4 {
        assert_eq!(finished.recv_timeout(WAIT).unwrap(), 4);
    }
    assert_eq!(pool.threads().0, 4);
}

#[test]
fn an_idle_thread_takes_the_next_job() {
    let pool = pool(Duration::from_secs(10), 8);
    let (done, finished) = mpsc::channel();
    let first = done.clone();
    pool.spawn(Box::new(move || {
        first.send(std::thread::current().id()).unwrap();
    }));
    let first = finished.recv_timeout(WAIT).unwrap();
    eventually("the thread to be idle", || pool.threads() == (1, 1));
    pool.spawn(Box::new(move || {
        done.send(std::thread::current().id()).unwrap();
    }));
    assert_eq!(finished.recv_timeout(WAIT).unwrap(), first);
    assert_eq!(pool.threads().0, 1);
}

#[test]
fn past_the_limit_jobs_wait_for_a_free_thread() {
    let pool = pool(Duration::from_secs(10), 2);
    let (release, hold) = mpsc::channel::<()>();
    let hold = std::sync::Arc::new(std::sync::Mutex::new(hold));
    let (done, finished) = mpsc::channel();
    for n in 0..5 {
        let done = done.clone();
        let hold = std::sync::Arc::clone(&hold);
        pool.spawn(Box::new(move || {
            if n < 2 {
                // The first two hold both threads until released.
                hold.lock().unwrap().recv_timeout(WAIT).unwrap();
            }
            done.send(n).unwrap();
        }));
    }
    assert_eq!(pool.threads().0, 2);
    assert!(finished.recv_timeout(Duration::from_millis(100)).is_err());
    release.send(()).unwrap();
    release.send(()).unwrap();
    let mut ran: Vec<i32> = (0..5)
        .map(|_| finished.recv_timeout(WAIT).unwrap())
        .collect();
    ran.sort_unstable();
    assert_eq!(ran, [0, 1, 2, 3, 4]);
    assert_eq!(pool.threads().0, 2);
}

#[test]
fn a_panicking_job_leaves_the_thread_working() {
    let pool = pool(Duration::from_secs(10), 1);
    pool.spawn(Box::new(|| panic!("a job that fails")));
    let (done, finished) = mpsc::channel();
    pool.spawn(Box::new(move || done.send(()).unwrap()));
    finished.recv_timeout(WAIT).unwrap();
    assert_eq!(pool.threads().0, 1);
}

#[test]
fn idle_threads_leave_and_new_ones_start_when_needed() {
    let pool = pool(Duration::from_millis(50), 4);
    let (done, finished) = mpsc::channel();
    let first = done.clone();
    pool.spawn(Box::new(move || first.send(()).unwrap()));
    finished.recv_timeout(WAIT).unwrap();
    eventually("the idle thread to leave", || pool.threads() == (0, 0));
    pool.spawn(Box::new(move || done.send(()).unwrap()));
    finished.recv_timeout(WAIT).unwrap();
}
