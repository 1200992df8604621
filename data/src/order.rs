//! The order a data layer visits its records in: Caffe's shuffle from
//! its generator, and a list's endless cycle from a `rand_skip` start.

/// Caffe's `shuffle(begin, end, prefetch_rng)`: a Fisher-Yates shuffle
/// drawing from Caffe's generator (`caffe_rng_rand`), so a seeded run
/// visits the same order every time.
pub(crate) fn shuffle<E>(items: &mut [E]) {
    for i in (1..items.len()).rev() {
        let j = (blob_kernels::cpu::rng_rand() as usize) % (i + 1);
        items.swap(i, j);
    }
}

/// The entries of a list file, visited from a start drawn by `rand_skip`
/// to the end and round again, shuffled first and at each wrap with
/// `shuffle` (Caffe's `ImageData` and the forks' list layers).
pub(crate) struct ListCycle<E> {
    entries: Vec<E>,
    shuffle: bool,
    start: usize,
}

impl<E> ListCycle<E> {
    /// The cycle over `entries` (at least one), starting at the draw
    /// `rand_skip` makes (Caffe's `caffe_rng_rand() % rand_skip`, 0 when
    /// it is 0). A draw past the list's end is an error, as Caffe's
    /// `CHECK_GT(lines_.size(), skip)` is.
    pub(crate) fn new(entries: Vec<E>, shuffle: bool, rand_skip: u32) -> Result<Self, String> {
        let start = match rand_skip {
            0 => 0,
            n => (blob_kernels::cpu::rng_rand() % n) as usize,
        };
        if start >= entries.len() {
            return Err(format!(
                "rand_skip drew {start}, but the list has {} entries",
                entries.len()
            ));
        }
        Ok(Self {
            entries,
            shuffle,
            start,
        })
    }

    /// Hands `visit` one entry after another, round the list for as long
    /// as it returns true.
    pub(crate) fn run(&mut self, mut visit: impl FnMut(&E) -> bool) {
        if self.shuffle {
            shuffle(&mut self.entries);
        }
        let mut at = self.start;
        while visit(&self.entries[at]) {
            at += 1;
            if at == self.entries.len() {
                at = 0;
                if self.shuffle {
                    shuffle(&mut self.entries);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first `n` entries `cycle` visits.
    fn visited(cycle: &mut ListCycle<u32>, n: usize) -> Vec<u32> {
        let mut seen = Vec::new();
        cycle.run(|&e| {
            seen.push(e);
            seen.len() < n
        });
        seen
    }

    #[test]
    fn a_list_runs_round_from_its_start() {
        let mut cycle = ListCycle::new(vec![0, 1, 2], false, 0).unwrap();
        assert_eq!(visited(&mut cycle, 7), [0, 1, 2, 0, 1, 2, 0]);
        // rand_skip 2 starts at the generator's draw modulo 2.
        blob_kernels::cpu::set_seed(3);
        let draw = (blob_kernels::cpu::rng_rand() % 2) as u32;
        blob_kernels::cpu::set_seed(3);
        let mut cycle = ListCycle::new(vec![0, 1, 2], false, 2).unwrap();
        assert_eq!(visited(&mut cycle, 3)[0], draw);
    }

    #[test]
    fn a_skip_past_the_end_is_refused() {
        // With rand_skip 1000 on a list of 2, some seed draws past it.
        let err = (0..50)
            .find_map(|seed| {
                blob_kernels::cpu::set_seed(seed);
                ListCycle::new(vec![0u32, 1], false, 1000).err()
            })
            .unwrap();
        assert!(err.contains("the list has 2 entries"), "{err}");
    }

    #[test]
    fn a_shuffled_list_visits_every_entry_once_a_round() {
        blob_kernels::cpu::set_seed(9);
        let mut cycle = ListCycle::new((0..10).collect(), true, 0).unwrap();
        let seen = visited(&mut cycle, 20);
        for round in seen.chunks(10) {
            let mut sorted = round.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        }
        assert_ne!(seen[..10], seen[10..], "each round is shuffled anew");
    }
}
