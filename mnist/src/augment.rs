//! Random translations of training images: the one departure from Caffe's
//! LeNet recipe that the trainer offers, off unless asked for
//! ([`Trainer::shift`](crate::Trainer::shift)).
//!
//! Caffe's recipe, trained on only 8,000 digits, memorises them (training
//! loss near 1e-3) and stops improving on unseen ones; moving each digit by
//! a pixel or two gives the net new images every epoch. The offsets are a
//! pure function of the iteration, so a resumed run sees the same images
//! as an uninterrupted one and `--resume` stays exact.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The `(rows, cols)` offset of every image of iteration `iter`, each
/// component uniform on `-max..=max`.
///
/// ```
/// use blobflow_mnist::augment::offsets;
/// let a = offsets(7, 64, 2);
/// assert_eq!(a, offsets(7, 64, 2)); // the same for the same iteration
/// assert!(a.iter().all(|&(dy, dx)| dy.abs() <= 2 && dx.abs() <= 2));
/// assert!(offsets(7, 64, 0).iter().all(|&o| o == (0, 0)));
/// ```
pub fn offsets(iter: usize, batch: usize, max: usize) -> Vec<(isize, isize)> {
    // Beyond a digit's width every image is blank; clamp so huge values
    // stay meaningful and the conversions below cannot overflow.
    let max = max.min(1 << 16) as i64;
    let mut rng = ChaCha8Rng::seed_from_u64(iter as u64);
    let mut draw = || rng.random_range(-max..=max) as isize;
    (0..batch).map(|_| (draw(), draw())).collect()
}

/// Writes `image` (`rows x cols`, row-major) moved down by `dy` and right
/// by `dx` into `out`; pixels moved in from outside are zero (background).
///
/// ```
/// use blobflow_mnist::augment::translate;
/// let image = [1.0, 2.0, 3.0, 4.0]; // 2 x 2
/// let mut out = [9.0; 4];
/// translate(&image, 2, 2, (0, 1), &mut out);
/// assert_eq!(out, [0.0, 1.0, 0.0, 3.0]);
/// translate(&image, 2, 2, (-1, 0), &mut out);
/// assert_eq!(out, [3.0, 4.0, 0.0, 0.0]);
/// ```
///
/// # Panics
/// If `image` or `out` does not hold `rows * cols` values.
pub fn translate(image: &[f32], rows: usize, cols: usize, by: (isize, isize), out: &mut [f32]) {
    assert_eq!(image.len(), rows * cols, "image is not rows x cols");
    assert_eq!(out.len(), rows * cols, "out is not rows x cols");
    let (dy, dx) = by;
    for (r, out_row) in out.chunks_exact_mut(cols).enumerate() {
        let src_r = r as isize - dy;
        if src_r < 0 || src_r >= rows as isize {
            out_row.fill(0.0);
            continue;
        }
        let src_row = &image[src_r as usize * cols..][..cols];
        for (c, o) in out_row.iter_mut().enumerate() {
            let src_c = c as isize - dx;
            *o = if (0..cols as isize).contains(&src_c) {
                src_row[src_c as usize]
            } else {
                0.0
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translation_keeps_every_pixel_that_stays_inside() {
        let (rows, cols) = (5, 7);
        let image: Vec<f32> = (1..=rows * cols).map(|v| v as f32).collect();
        let mut out = vec![0.0; rows * cols];
        for dy in -3..=3isize {
            for dx in -3..=3isize {
                translate(&image, rows, cols, (dy, dx), &mut out);
                for r in 0..rows as isize {
                    for c in 0..cols as isize {
                        let (sr, sc) = (r - dy, c - dx);
                        let want = if (0..rows as isize).contains(&sr)
                            && (0..cols as isize).contains(&sc)
                        {
                            image[sr as usize * cols + sc as usize]
                        } else {
                            0.0
                        };
                        assert_eq!(
                            out[r as usize * cols + c as usize],
                            want,
                            "({dy}, {dx}) at ({r}, {c})"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn offsets_cover_the_whole_range_and_differ_between_iterations() {
        let all: Vec<_> = (0..50).flat_map(|i| offsets(i, 64, 2)).collect();
        for v in -2..=2 {
            assert!(
                all.iter().any(|o| o.0 == v) && all.iter().any(|o| o.1 == v),
                "{v} never drawn"
            );
        }
        assert_ne!(offsets(1, 64, 2), offsets(2, 64, 2));
    }
}
