//! A parallel map over an ordered list whose results are consumed in order, so that output is
//! deterministic while files are searched side by side. Workers stay within a window ahead of
//! the consumer (bounded memory), and the consumer can stop everything early.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, PoisonError};

use crate::util::MutexExt as _;

/// How far ahead of the consumer workers may run.
const WINDOW: usize = 256;

/// Whether to go on after an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Go on.
    Continue,
    /// Stop: nothing more is needed.
    Stop,
}

struct State<R> {
    next: usize,
    consumed: usize,
    done: BTreeMap<usize, R>,
    stop: bool,
    running: usize,
}

/// Maps `work` over `items` on `threads` threads and feeds the results to `consume` in order.
/// Each thread has its own state, made by `init` (e.g. a searcher with its buffers). No more
/// threads start than there are items, and none for one item (or one thread): it runs on the
/// calling thread.
pub(crate) fn map_in_order<T, S, R, I, W, C>(
    items: &[T],
    threads: usize,
    init: I,
    work: W,
    mut consume: C,
) where
    T: Sync,
    R: Send,
    I: Fn() -> S + Sync,
    W: Fn(&mut S, &T) -> R + Sync,
    C: FnMut(R) -> Flow,
{
    let threads = threads.min(items.len()).max(1);
    if threads == 1 {
        let mut local = init();
        for item in items {
            if consume(work(&mut local, item)) == Flow::Stop {
                break;
            }
        }
        return;
    }
    let state = Mutex::new(State {
        next: 0,
        consumed: 0,
        done: BTreeMap::new(),
        stop: false,
        running: threads,
    });
    let changed = Condvar::new();
    let lock = || state.locked();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut local = init();
                loop {
                    let index = {
                        let mut s = lock();
                        while !s.stop && s.next < items.len() && s.next >= s.consumed + WINDOW {
                            s = changed.wait(s).unwrap_or_else(PoisonError::into_inner);
                        }
                        if s.stop || s.next >= items.len() {
                            s.running -= 1;
                            changed.notify_all();
                            break;
                        }
                        s.next += 1;
                        s.next - 1
                    };
                    let result = work(&mut local, &items[index]);
                    let mut s = lock();
                    s.done.insert(index, result);
                    changed.notify_all();
                }
            });
        }
        loop {
            let result = {
                let mut s = lock();
                loop {
                    let consumed = s.consumed;
                    if let Some(result) = s.done.remove(&consumed) {
                        s.consumed += 1;
                        changed.notify_all();
                        break Some(result);
                    }
                    if s.consumed >= items.len()
                        || (s.running == 0 && !s.done.contains_key(&consumed))
                    {
                        break None;
                    }
                    s = changed.wait(s).unwrap_or_else(PoisonError::into_inner);
                }
            };
            let Some(result) = result else { break };
            if consume(result) == Flow::Stop {
                let mut s = lock();
                s.stop = true;
                s.done.clear();
                changed.notify_all();
                break;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn results_arrive_in_order() {
        let items: Vec<usize> = (0..2000).collect();
        let mut seen = Vec::new();
        map_in_order(
            &items,
            4,
            || (),
            |(), &i| i * 2,
            |r| {
                seen.push(r);
                Flow::Continue
            },
        );
        assert_eq!(seen, items.iter().map(|i| i * 2).collect::<Vec<_>>());
    }

    #[test]
    fn stopping_early_skips_the_rest() {
        let items: Vec<usize> = (0..100_000).collect();
        let worked = AtomicUsize::new(0);
        let mut seen = 0;
        map_in_order(
            &items,
            4,
            || (),
            |(), &i| {
                worked.fetch_add(1, Ordering::Relaxed);
                i
            },
            |_| {
                seen += 1;
                if seen == 10 {
                    Flow::Stop
                } else {
                    Flow::Continue
                }
            },
        );
        assert_eq!(seen, 10);
        assert!(
            worked.load(Ordering::Relaxed) < 10 + WINDOW + 8,
            "{}",
            worked.load(Ordering::Relaxed)
        );
    }

    #[test]
    fn one_item_is_worked_on_the_calling_thread() {
        let caller = std::thread::current().id();
        let mut on = Vec::new();
        map_in_order(
            &[7],
            4,
            || (),
            |(), &i| (i, std::thread::current().id()),
            |r| {
                on.push(r);
                Flow::Continue
            },
        );
        assert_eq!(on, vec![(7, caller)]);
        // Two items and more go to threads of their own.
        let mut on = Vec::new();
        map_in_order(
            &[1, 2],
            4,
            || (),
            |(), _| std::thread::current().id(),
            |r| {
                on.push(r);
                Flow::Continue
            },
        );
        assert_eq!(on.len(), 2);
        assert!(on.iter().all(|id| *id != caller), "{on:?}");
    }

    #[test]
    fn empty_input_is_fine() {
        map_in_order(&[] as &[u8], 3, || (), |(), _| 0, |_| Flow::Continue);
    }
}
