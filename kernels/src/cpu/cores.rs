//! Work shared across the cores, the calling thread taking a part.
//!
//! rayon's parallel iterators, called from a thread outside its pool (a
//! user's `main`), hand the whole job to the pool and put the caller to
//! sleep until it is done: about 15 µs each time on a 2-core VM, longer
//! than most of a small net's layers take. [`on_cores`] instead queues all
//! parts but one on the pool and runs that one on the calling thread
//! meanwhile (rayon's `in_place_scope`): 256 Ki floats updated on two
//! cores take 11 µs against 21 µs through a parallel iterator and 19 µs on
//! one core. Called from inside the pool, it is a plain fork-join.

/// Runs `f` on every item: the first on the calling thread, the others
/// queued on rayon's pool (`RAYON_NUM_THREADS`, or the pool installed
/// around the call), and returns once all are done. Cut the work into
/// about [`cores`] items: the calling thread takes one only.
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
    let f = &f;
    rayon::in_place_scope(|scope| {
        scope.spawn(move |_| f(second));
        for item in items {
            scope.spawn(move |_| f(item));
        }
        f(first);
    });
}

/// How many parts to cut work into: the threads of the current rayon pool.
///
/// ```
/// assert!(blob_kernels::cpu::cores() >= 1);
/// ```
pub fn cores() -> usize {
    rayon::current_num_threads().max(1)
}
