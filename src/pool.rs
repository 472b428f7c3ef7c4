//! A persistent pool of worker threads that the kernels split their work over (`-T`).
//!
//! A [`Pool`] is made once per run and [installed](Pool::install) on the thread that codes a
//! stream; the kernels of that thread then cut their outputs into parts — rows of a product,
//! steps of a segment, channels of the scan — and [`Pool::run`] hands the parts out to the
//! workers and to the calling thread itself. A part is a whole set of output elements, each
//! computed on one thread by the single-threaded code, so the results never depend on the
//! number of threads (docs/determinism.md). Threads that have no pool installed (the workers
//! themselves, or a program that never installs one) run every kernel on their own.
//!
//! **Waiting.** A job is published by one atomic store; an idle worker watches that word for
//! [`SPIN`] (the gap between two kernels of one byte is a few microseconds), pausing briefly
//! and then yielding its core between looks ([`Backoff`]), and then sleeps on a condition
//! variable, so a pool whose stream waits for input does not burn a core, and on a machine
//! with more busy threads than cores the others run. The caller runs parts too, and once none
//! is left waits for the parts others claimed in the same way.

use std::cell::{Cell, UnsafeCell};
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most threads a pool has (more would only add waiting on a machine of this kind).
pub const MAX_THREADS: usize = 64;

/// The least work (in multiply-adds, or the like) the kernels give a part of its own by
/// default: handing a part to another core costs 0.1 to 1 µs, a few thousand multiply-adds.
pub const MIN_PART_WORK: usize = 24 * 1024;

/// The environment variable that sets [`Pool::min_part_work`] for the binary's pool: tests and
/// scripts/cross-build-check.sh set 1 so that even tiny models split every kernel; measurements
/// may try other values. Only speed depends on it.
pub const MIN_PART_WORK_ENV_VAR: &str = "LMZIP_THREAD_MIN_WORK";

/// How long an idle worker (and a caller waiting for the last parts) spins before it sleeps
/// (or yields).
const SPIN: Duration = Duration::from_millis(1);

/// A job: called once with each part index.
type Task = dyn Fn(usize) + Sync;

/// The job word: `generation << 32 | back << 16 | front`: the parts `front..back` are still
/// to claim. The caller claims from the front and the workers from the back, so with two
/// threads each keeps its half of a matrix in its own cache from one call to the next, and a
/// caller whose worker is slow to come takes the whole job.
const BACK_SHIFT: u32 = 16;
const FIELD: u64 = 0xffff;

/// What the caller and the workers share.
struct Shared {
    /// The job word (above). A part is claimed by advancing `next` with a compare-and-swap, so
    /// a claim never lands in a later job than the one read.
    job: AtomicU64,
    /// The current job's task, its lifetime erased. Written only by [`Pool::run`] while no part
    /// can be claimed or is running; read by whoever claimed a part of the job.
    task: UnsafeCell<Option<&'static Task>>,
    /// Parts of the current job finished.
    done: AtomicUsize,
    /// A part panicked (the caller panics in turn once the job is over).
    panicked: AtomicBool,
    /// Workers asleep or about to sleep; the caller wakes them when it is non-zero.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    quit: AtomicBool,
}

// SAFETY: `task` is the only field that is not Sync. It is written by the pool's one caller
// (Pool is not Sync) only between jobs, when no part can be claimed and none runs, and read only
// by a thread holding a claimed part of the job that wrote it, which keeps the job (and the
// task) alive until that part is counted in `done`. The job word's release store and the
// claim's acquire order the write before every read.
unsafe impl Sync for Shared {}

impl Shared {
    fn claimable(word: u64) -> bool {
        (word & FIELD) < ((word >> BACK_SHIFT) & FIELD)
    }

    /// Claims a part of the current job, if one is left: the first (the caller) or the last
    /// (a worker).
    fn claim(&self, from_back: bool) -> Option<usize> {
        let mut word = self.job.load(Ordering::Acquire);
        while Self::claimable(word) {
            let (claimed, next) = if from_back {
                let back = (word >> BACK_SHIFT) & FIELD;
                (back - 1, word - (1 << BACK_SHIFT))
            } else {
                (word & FIELD, word + 1)
            };
            let (success, failure) = (Ordering::AcqRel, Ordering::Acquire);
            match self.job.compare_exchange_weak(word, next, success, failure) {
                Ok(_) => return Some(claimed as usize),
                Err(now) => word = now,
            }
        }
        None
    }

    /// Runs a claimed part and counts it done.
    fn run_part(&self, part: usize) {
        // SAFETY: see `unsafe impl Sync for Shared`: this part is claimed and not yet counted,
        // so the task written for its job is still the cell's value and still alive.
        let task = unsafe { *self.task.get() };
        let task = task.expect("a claimed part has a task");
        if catch_unwind(AssertUnwindSafe(|| task(part))).is_err() {
            self.panicked.store(true, Ordering::Relaxed);
        }
        self.done.fetch_add(1, Ordering::Release);
    }

    /// A worker's life: run parts while there are any, wait a while ([`Backoff`]), sleep.
    fn work(&self) {
        loop {
            let mut backoff = Backoff::new();
            loop {
                if let Some(part) = self.claim(true) {
                    self.run_part(part);
                    backoff = Backoff::new();
                    continue;
                }
                if self.quit.load(Ordering::Acquire) {
                    return;
                }
                if !backoff.wait() {
                    break;
                }
            }
            self.sleep();
        }
    }

    /// Sleeps until a job has a part to claim or the pool ends.
    fn sleep(&self) {
        let mut guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // Sequentially consistent with the caller's publish-then-read-sleepers: either it sees
        // this sleeper and notifies (under the lock, so not before the wait), or this sees the job.
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while !Self::claimable(self.job.load(Ordering::SeqCst)) && !self.quit.load(Ordering::SeqCst)
        {
            guard = self.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    fn wake_sleepers(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.wake.notify_all();
        }
    }
}

/// A pool of `threads − 1` workers plus the thread that calls it. Not `Sync`: one thread
/// drives it (the one it is installed on); it may be moved to another between jobs.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    min_part_work: usize,
    /// A job is running: a part that calls [`Pool::run`] again (on the caller's thread) gets
    /// its job run there, alone. Also what makes the pool not Sync: one thread drives it.
    busy: Cell<bool>,
}

impl Pool {
    /// A pool that runs jobs on `threads` threads, the caller's included (`0` counts as 1; at
    /// most [`MAX_THREADS`]). Fails only if the system refuses a thread.
    pub fn new(threads: usize) -> std::io::Result<Pool> {
        let shared = Arc::new(Shared {
            job: AtomicU64::new(0),
            task: UnsafeCell::new(None),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            quit: AtomicBool::new(false),
        });
        let mut pool = Pool {
            shared,
            workers: Vec::new(),
            min_part_work: MIN_PART_WORK,
            busy: Cell::new(false),
        };
        for k in 1..threads.clamp(1, MAX_THREADS) {
            let shared = Arc::clone(&pool.shared);
            let handle = std::thread::Builder::new()
                .name(format!("lmzip-kernel-{k}"))
                .spawn(move || shared.work())?;
            pool.workers.push(handle);
        }
        Ok(pool)
    }

    /// Threads that run a job, the caller's included.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// The pool with another least work per part (at least 1): tests split the kernels of
    /// tiny models with 1. Only speed depends on it, never a result.
    pub fn with_min_part_work(mut self, work: usize) -> Pool {
        self.min_part_work = work.max(1);
        self
    }

    /// The least work the kernels give a part of its own on this pool.
    pub fn min_part_work(&self) -> usize {
        self.min_part_work
    }

    /// Parts to cut a job of `work` into: one per thread, fewer when a part would hold less
    /// than [`Pool::min_part_work`], at most `most` (and at least one).
    pub fn parts_for(&self, work: usize, most: usize) -> usize {
        (work / self.min_part_work)
            .clamp(1, self.threads())
            .min(most.max(1))
    }

    /// Calls `task(part)` once for each part in `0..parts`, spread over the pool's threads, and
    /// returns when all have returned. A part that panics makes this panic after the others.
    pub fn run(&self, parts: usize, task: &(dyn Fn(usize) + Sync)) {
        if parts <= 1 || self.workers.is_empty() || self.busy.get() {
            (0..parts).for_each(task);
            return;
        }
        self.busy.set(true);
        assert!(parts as u64 <= FIELD, "too many parts for one job");
        let sh = &*self.shared;
        // SAFETY: only the lifetime is erased. The task is read only by threads holding a part
        // of this job, and this function returns (and the borrow ends) only after every part
        // is counted done; the cell is cleared before that.
        let task =
            unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync + '_), &'static Task>(task) };
        // SAFETY: no part of an earlier job is claimable or running (the previous call waited
        // for all of them), and no other thread calls `run` (Pool is not Sync).
        unsafe { *sh.task.get() = Some(task) };
        sh.done.store(0, Ordering::Relaxed);
        let generation = (sh.job.load(Ordering::Relaxed) >> 32).wrapping_add(1) & 0xffff_ffff;
        let word = (generation << 32) | ((parts as u64) << BACK_SHIFT);
        sh.job.store(word, Ordering::SeqCst);
        sh.wake_sleepers();
        while let Some(part) = sh.claim(false) {
            sh.run_part(part);
        }
        let mut backoff = Backoff::new();
        while sh.done.load(Ordering::Acquire) < parts {
            backoff.wait();
        }
        // SAFETY: every part is done and none can be claimed: no thread reads the cell now.
        unsafe { *sh.task.get() = None };
        self.busy.set(false);
        if sh.panicked.swap(false, Ordering::Relaxed) {
            panic!("a part of a pool job panicked");
        }
    }

    /// Calls `f(i, &mut items[i])` for every item, each item on one thread.
    pub fn for_each_mut<T: Send>(&self, items: &mut [T], f: impl Fn(usize, &mut T) + Sync) {
        let base = ItemsPtr(items.as_mut_ptr());
        self.run(items.len(), &|i| {
            // SAFETY: `run` calls this once for each `i < items.len()`, so each item is
            // borrowed by one thread at a time, and `items` outlives the call.
            let item = unsafe { &mut *base.at(i) };
            f(i, item)
        });
    }

    /// Runs `f` with this pool installed on the current thread: the kernels `f` calls on this
    /// thread split their work over the pool. The previous pool (if any) is restored after.
    pub fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(*const Pool);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(CURRENT.with(|c| c.replace(self)));
        f()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.quit.store(true, Ordering::SeqCst);
        {
            let _guard = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

/// Waiting on an atomic without a lock: a few pause instructions (a part of another thread
/// usually ends within microseconds), then one yield of the core per check. On an idle machine
/// a yield returns at once, so the waiter stays as quick as a spinner; on a busy one it lets
/// the other threads run instead of burning their time.
struct Backoff {
    start: Instant,
    checks: u32,
}

impl Backoff {
    /// Checks that only pause before the waiter starts to yield.
    const PAUSES: u32 = 64;

    fn new() -> Backoff {
        Backoff {
            start: Instant::now(),
            checks: 0,
        }
    }

    /// Waits between two checks; false once [`SPIN`] has passed since the start.
    fn wait(&mut self) -> bool {
        self.checks = self.checks.saturating_add(1);
        if self.checks < Self::PAUSES {
            std::hint::spin_loop();
            return true;
        }
        std::thread::yield_now();
        self.start.elapsed() <= SPIN
    }
}

/// The items of [`Pool::for_each_mut`], shared by reference with the threads.
struct ItemsPtr<T>(*mut T);

// SAFETY: the threads only reach distinct items through it (see `for_each_mut`), and the
// items are Send.
unsafe impl<T: Send> Sync for ItemsPtr<T> {}

impl<T> ItemsPtr<T> {
    /// The address of item `i` (a method, so that closures capture the whole Sync wrapper).
    fn at(&self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }
}

thread_local! {
    /// The pool installed on this thread ([`Pool::install`]), or null.
    static CURRENT: Cell<*const Pool> = const { Cell::new(std::ptr::null()) };
}

/// The pool installed on this thread, if it has more than one thread.
pub fn with_current<R>(f: impl FnOnce(Option<&Pool>) -> R) -> R {
    let ptr = CURRENT.with(|c| c.get());
    // SAFETY: a non-null pointer was set by `Pool::install` on this thread, whose borrow of the
    // pool lasts until it puts the previous value back; the reference cannot escape `f`.
    let pool = unsafe { ptr.as_ref() };
    f(pool.filter(|p| p.threads() > 1))
}

/// `0..len` cut into `parts` ranges of nearly equal length, every boundary a multiple of
/// `align` (so the last range takes the rest); ranges may be empty when `len` is small.
pub fn split(len: usize, parts: usize, align: usize) -> impl Iterator<Item = Range<usize>> {
    let parts = parts.max(1);
    let align = align.max(1);
    let cut = move |k: usize| {
        if k >= parts {
            len
        } else {
            (len * k / parts / align * align).min(len)
        }
    };
    (0..parts).map(move |k| cut(k)..cut(k + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_runs_once_on_any_number_of_threads() {
        for threads in [1, 2, 3, 5] {
            let pool = Pool::new(threads).unwrap();
            assert_eq!(pool.threads(), threads);
            for parts in [0, 1, 2, 3, 7, 100] {
                for _ in 0..50 {
                    let mut hits = vec![0u32; parts];
                    pool.for_each_mut(&mut hits, |i, h| *h += i as u32 + 1);
                    let want: Vec<u32> = (1..=parts as u32).collect();
                    assert_eq!(hits, want, "{threads} threads, {parts} parts");
                }
            }
        }
    }

    #[test]
    fn sleeping_workers_wake_for_the_next_job() {
        let pool = Pool::new(2).unwrap();
        let mut v = vec![0; 4];
        pool.for_each_mut(&mut v, |i, x| *x = i);
        std::thread::sleep(SPIN * 20);
        pool.for_each_mut(&mut v, |i, x| *x += i);
        assert_eq!(v, [0, 2, 4, 6]);
    }

    #[test]
    fn a_panicking_part_panics_the_caller_and_the_pool_lives_on() {
        let pool = Pool::new(3).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(6, &|i| assert!(i != 4, "part four"));
        }));
        assert!(r.is_err());
        let mut v = vec![0; 3];
        pool.for_each_mut(&mut v, |i, x| *x = i + 1);
        assert_eq!(v, [1, 2, 3]);
    }

    #[test]
    fn a_job_started_inside_a_part_runs_alone() {
        let pool = Pool::new(2).unwrap();
        pool.install(|| {
            let mut outer = vec![0usize; 4];
            with_current(|p| {
                p.unwrap().for_each_mut(&mut outer, |i, x| {
                    // On the caller's thread the installed pool is busy: the inner job runs
                    // there, alone; workers have no pool installed.
                    let mut inner = vec![0usize; 3];
                    with_current(|q| match q {
                        Some(q) => q.for_each_mut(&mut inner, |j, y| *y = j + 1),
                        None => inner.iter_mut().enumerate().for_each(|(j, y)| *y = j + 1),
                    });
                    *x = i + inner.iter().sum::<usize>();
                });
            });
            assert_eq!(outer, [6, 7, 8, 9]);
        });
    }

    #[test]
    fn install_sets_the_pool_for_this_thread_only() {
        let pool = Pool::new(2).unwrap();
        assert!(with_current(|p| p.is_none()));
        pool.install(|| {
            assert_eq!(with_current(|p| p.map(Pool::threads)), Some(2));
            let elsewhere = std::thread::spawn(|| with_current(|p| p.is_none()));
            assert!(elsewhere.join().unwrap());
        });
        assert!(with_current(|p| p.is_none()));
        let single = Pool::new(1).unwrap();
        single.install(|| assert!(with_current(|p| p.is_none())));
    }

    #[test]
    fn split_covers_the_range_on_aligned_boundaries() {
        for (len, parts, align) in [(16, 2, 2), (17, 3, 2), (5, 4, 8), (0, 2, 1), (256, 3, 8)] {
            let ranges: Vec<_> = split(len, parts, align).collect();
            assert_eq!(ranges.len(), parts);
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges[parts - 1].end, len);
            for w in ranges.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert!(w[0].end % align == 0 || w[0].end == len);
            }
        }
    }
}
