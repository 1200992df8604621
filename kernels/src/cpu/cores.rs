//! Work shared across the cores, the calling thread taking part.
//!
//! On the 2-core VMs this is measured on, handing work to a thread that
//! has gone to sleep costs 30-45 µs (futex wake-up and scheduling), and
//! rayon's idle threads sleep after a few µs without work: a small net's
//! layers (10-200 µs each) gain nothing from a second core that way, and a
//! parallel iterator called from outside rayon's pool also puts the caller
//! to sleep until the pool is done. So, for callers outside any rayon
//! pool, [`on_cores`] shares work with its own helper threads (one fewer
//! than the cores, the caller being the last):
//!
//! - the caller publishes the parts and takes them one by one itself, as
//!   do the helpers; a helper that is not awake yet simply finds none left,
//!   so the caller never waits for a wake-up;
//! - a helper spins for 500 µs after its last part before it sleeps, so
//!   parts that follow soon find it awake (OpenMP runtimes do the same, for
//!   longer).
//!
//! Called from inside a rayon pool (`pool.install(|| ...)`, or a rayon
//! task), the parts go to that pool instead, as rayon's fork-join.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a helper keeps looking for work after its last part: long
/// enough to span the layers of a small net that run on one core between
/// those that share (O-Net at batch 1 on two threads, same run: 0.31 ms
/// a pass spinning 500 µs, 0.33-0.36 spinning 50 µs, after which the
/// helper slept through the next shared layer and its parts went to the
/// caller). An earlier VM measured a longer spin slowing the caller (0.40
/// to 0.72 ms at 300 µs); today's did not.
const SPIN: Duration = Duration::from_micros(500);

/// Rounds of 64 pauses (about 1.2 µs each) between a spinning helper's
/// yields.
const YIELD_EVERY: u32 = 16;

/// Runs `f` on every item, on the calling thread and the helpers (see
/// the module docs), and returns once all are done; a panic in any part
/// is raised here once every part has finished. Cut the work into about
/// [`cores`] items.
///
/// ```
/// let mut v = vec![1.0f32; 1000];
/// let parts = blob_kernels::cpu::cores();
/// blob_kernels::cpu::on_cores(v.chunks_mut(1000usize.div_ceil(parts)), |chunk| {
///     chunk.iter_mut().for_each(|x| *x *= 2.0)
/// });
/// assert!(v.iter().all(|&x| x == 2.0));
/// ```
pub fn on_cores<I: Send>(items: impl IntoIterator<Item = I>, f: impl Fn(I) + Sync) {
    let mut items = items.into_iter();
    let Some(first) = items.next() else {
        return;
    };
    let Some(second) = items.next() else {
        f(first);
        return;
    };
    if rayon::current_thread_index().is_some() {
        let f = &f;
        rayon::in_place_scope(|scope| {
            scope.spawn(move |_| f(second));
            for item in items {
                scope.spawn(move |_| f(item));
            }
            f(first);
        });
        return;
    }
    let slots: Vec<Mutex<Option<I>>> = [first, second]
        .into_iter()
        .chain(items)
        .map(|item| Mutex::new(Some(item)))
        .collect();
    let run = |i: usize| {
        let item = slots[i]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(item) = item {
            f(item);
        }
    };
    match helpers() {
        Some(helpers) => helpers.share(slots.len(), &run),
        None => run_alone(slots.len(), &run),
    }
}

/// Runs every part on this thread, then raises the first panic, if any
/// (the same contract as with helpers).
fn run_alone(len: usize, run: &(dyn Fn(usize) + Sync)) {
    let mut first_panic = None;
    for i in 0..len {
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| run(i))) {
            first_panic.get_or_insert(payload);
        }
    }
    if let Some(payload) = first_panic {
        panic::resume_unwind(payload);
    }
}

/// How many parts to cut work into: the threads of the current rayon
/// pool, or outside any pool the helpers and the caller.
///
/// ```
/// assert!(blob_kernels::cpu::cores() >= 1);
/// ```
pub fn cores() -> usize {
    if rayon::current_thread_index().is_some() {
        rayon::current_num_threads()
    } else {
        helpers().map_or(1, |h| h.threads + 1)
    }
}

/// One call's parts: claimed by index, each exactly once.
///
/// Each thread first claims its own share of the parts, in order (the
/// caller the first share, helper `k` the `k`-th), then takes what is left
/// of the others' from the end backwards. So with the helpers awake, part
/// `k` of a call runs on the same core call after call, and the data it
/// touches stays in that core's caches: a 40 MB blob scaled in place on
/// two Zen 5 cores, each half in its own core's L3, took 0.23-0.26 ms a
/// call where the halves changed cores from call to call 0.31-0.49 ms
/// (OpenBLAS, whose threads keep their parts, 0.24 ms). A helper still
/// asleep simply finds its share taken.
struct Batch {
    /// Whether part `i` has been claimed.
    claimed: Box<[AtomicBool]>,
    /// The threads that may work on the batch: the caller and the helpers.
    threads: usize,
    len: usize,
    /// Parts run to the end (or to a panic).
    finished: AtomicUsize,
    /// Runs part `i`. Borrowed from the caller's stack: valid while the
    /// batch is published and until every part has finished.
    run: *const (dyn Fn(usize) + Sync),
    /// The first panic of a part, raised by the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Batch {
    /// Claims and runs parts until none is left: thread `me`'s own share
    /// first (0 is the caller, `k` helper `k`), then the others' from the
    /// end.
    fn work(&self, me: usize) {
        let own = self.len * me / self.threads..self.len * (me + 1) / self.threads;
        for i in own
            .clone()
            .chain((0..self.len).rev().filter(|i| !own.contains(i)))
        {
            if !self.claimed[i].load(Relaxed) && !self.claimed[i].swap(true, SeqCst) {
                self.run_part(i);
            }
        }
    }

    fn run_part(&self, i: usize) {
        // SAFETY: `run` stays valid until `finished` reaches `len`, which
        // cannot happen before this part finishes below.
        let run = unsafe { &*self.run };
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| run(i))) {
            let mut first = self.panic.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert(payload);
        }
        self.finished.fetch_add(1, SeqCst);
    }
}

/// The helper threads and the one batch they may be working on.
struct Helpers {
    threads: usize,
    /// The published batch, or null.
    batch: AtomicPtr<Batch>,
    /// Helpers between reading `batch` and being done with it.
    reading: AtomicUsize,
    /// Whether a caller holds the helpers (others run their parts alone).
    taken: AtomicBool,
    /// Bumped for each batch, to wake sleeping helpers.
    generation: AtomicU64,
    sleeping: Mutex<usize>,
    wake: Condvar,
}

// SAFETY: the raw pointers inside are only dereferenced under the
// protocol of `share` and `look_for_work`, which keeps each batch alive
// while any thread can reach it.
unsafe impl Sync for Helpers {}
// SAFETY: as above.
unsafe impl Send for Helpers {}

impl Helpers {
    /// Runs `run(0..len)` on this thread and the helpers.
    fn share(&'static self, len: usize, run: &(dyn Fn(usize) + Sync)) {
        if self.taken.swap(true, SeqCst) {
            // Another caller (or a part of this one) holds the helpers.
            return run_alone(len, run);
        }
        // SAFETY: only the lifetime is erased; `share` returns only after
        // every part has finished and no helper can still reach the batch.
        let run: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(run) };
        let batch = Batch {
            claimed: (0..len).map(|_| AtomicBool::new(false)).collect(),
            threads: self.threads + 1,
            len,
            finished: AtomicUsize::new(0),
            run,
            panic: Mutex::new(None),
        };
        self.batch.store((&raw const batch).cast_mut(), SeqCst);
        self.generation.fetch_add(1, SeqCst);
        if *self.sleeping.lock().unwrap_or_else(|p| p.into_inner()) > 0 {
            self.wake.notify_all();
        }
        batch.work(0);
        while batch.finished.load(SeqCst) < len {
            std::hint::spin_loop();
        }
        self.batch.store(std::ptr::null_mut(), SeqCst);
        while self.reading.load(SeqCst) > 0 {
            std::hint::spin_loop();
        }
        self.taken.store(false, SeqCst);
        let panic = batch.panic.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(payload) = panic {
            panic::resume_unwind(payload);
        }
    }

    /// Works on the published batch, if any, as helper `me`; says whether
    /// there was one.
    fn look_for_work(&self, me: usize) -> bool {
        // Announce the read before looking, so a caller that has withdrawn
        // its batch waits for this thread (or this thread sees null).
        self.reading.fetch_add(1, SeqCst);
        let batch = self.batch.load(SeqCst);
        let found = !batch.is_null();
        if found {
            // SAFETY: the caller keeps the batch alive until `reading`
            // drops to 0 after withdrawing it.
            unsafe { &*batch }.work(me);
        }
        self.reading.fetch_sub(1, SeqCst);
        found
    }

    /// Helper `me`'s life (1 and up): work, spin for [`SPIN`] looking for
    /// more, sleep until the next batch.
    fn serve(&self, me: usize) {
        loop {
            let mut idle_since = Instant::now();
            let mut seen = self.generation.load(SeqCst);
            let mut rounds = 0u32;
            loop {
                let now = self.generation.load(SeqCst);
                if now != seen {
                    seen = now;
                    self.look_for_work(me);
                    idle_since = Instant::now();
                } else if idle_since.elapsed() > SPIN {
                    break;
                }
                // Yield now and then: should the scheduler have put this
                // helper on the caller's core, the caller gets it back
                // within ~20 µs. Not every round: a yield costs ~0.9 µs
                // in a VM, and a batch published meanwhile waits for it.
                rounds = rounds.wrapping_add(1);
                if rounds.is_multiple_of(YIELD_EVERY) {
                    std::thread::yield_now();
                }
                // Watch for a batch between pauses: a pause is ~65 cycles
                // on Zen, and 64 of them unwatched made every batch wait
                // 2.3-2.5 µs for the helper.
                for _ in 0..64 {
                    if self.generation.load(Relaxed) != seen {
                        break;
                    }
                    std::hint::spin_loop();
                }
            }
            let mut sleeping = self.sleeping.lock().unwrap_or_else(|p| p.into_inner());
            *sleeping += 1;
            while self.generation.load(SeqCst) == seen {
                sleeping = self.wake.wait(sleeping).unwrap_or_else(|p| p.into_inner());
            }
            *sleeping -= 1;
            drop(sleeping);
            self.look_for_work(me);
        }
    }
}

/// The helpers of callers outside any rayon pool, started on first use:
/// as many as the global pool would have threads (`RAYON_NUM_THREADS`,
/// or every core), less one; none on one core.
fn helpers() -> Option<&'static Helpers> {
    static HELPERS: OnceLock<Option<&'static Helpers>> = OnceLock::new();
    *HELPERS.get_or_init(|| {
        let cores = std::env::var("RAYON_NUM_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        if cores < 2 {
            return None;
        }
        let helpers: &'static Helpers = Box::leak(Box::new(Helpers {
            threads: cores - 1,
            batch: AtomicPtr::new(std::ptr::null_mut()),
            reading: AtomicUsize::new(0),
            taken: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            sleeping: Mutex::new(0),
            wake: Condvar::new(),
        }));
        // A helper that cannot start leaves its parts to the others and
        // the caller, who claim every part between them.
        let started = (1..cores)
            .filter(|i| {
                std::thread::Builder::new()
                    .name(format!("blobflow-helper-{i}"))
                    .spawn({
                        let me = *i;
                        move || helpers.serve(me)
                    })
                    .is_ok()
            })
            .count();
        (started > 0).then_some(helpers)
    })
}
