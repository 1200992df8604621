//! What the YOLO fork (eric612/MobileNet-YOLO) adds to the SSD fork's
//! `AnnotatedData`: its label layout (`yolo_data_type: 1`, what its
//! `Yolov3` and `RegionLoss` read) and its crop jitter
//! (`yolo_data_jitter`, darknet's random crops in place of the batch
//! samplers).

use blob_kernels::cpu::SeededRng;
use blob_layers::YOLO_LABEL_ROWS;

use crate::annotated_data::{Object, Rect, uniform};

/// How AnnotatedData's label top holds a batch's boxes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum LabelLayout {
    /// The SSD fork's `(1, 1, boxes, 8)`: `[item, label, instance, xmin,
    /// ymin, xmax, ymax, difficult]` per box, one row of -1 for none.
    Ssd,
    /// The YOLO fork's `(N, 1, 300, 5)`: each image's boxes as `[label -
    /// 1, centre x, centre y, width, height]`, zeros after them; difficult
    /// boxes left out unless `train_difficult`.
    Yolo { train_difficult: bool },
}

impl LabelLayout {
    /// The boxes of one record this layout keeps; more than a YOLO
    /// image holds is an error (the fork warns and writes past its
    /// buffer).
    pub(crate) fn kept<'a>(&self, objects: &'a [Object]) -> Result<Vec<&'a Object>, String> {
        let kept: Vec<&Object> = match self {
            LabelLayout::Ssd => objects.iter().collect(),
            LabelLayout::Yolo { train_difficult } => objects
                .iter()
                .filter(|o| *train_difficult || !o.difficult)
                .collect(),
        };
        if matches!(self, LabelLayout::Yolo { .. }) && kept.len() > YOLO_LABEL_ROWS {
            return Err(format!(
                "{} boxes, more than the {YOLO_LABEL_ROWS} an image holds with yolo_data_type: 1",
                kept.len()
            ));
        }
        Ok(kept)
    }

    /// The label top of a batch whose items left `boxes`: its shape and
    /// its values.
    pub(crate) fn top(&self, boxes: &[Vec<Object>]) -> (Vec<usize>, Vec<f32>) {
        match self {
            LabelLayout::Ssd => {
                let rows: Vec<[f32; 8]> = boxes
                    .iter()
                    .enumerate()
                    .flat_map(|(item, objects)| {
                        objects.iter().map(move |o| {
                            let r = o.row();
                            [item as f32, r[0], r[1], r[2], r[3], r[4], r[5], r[6]]
                        })
                    })
                    .collect();
                if rows.is_empty() {
                    return (vec![1, 1, 1, 8], vec![-1.0; 8]);
                }
                (vec![1, 1, rows.len(), 8], rows.concat())
            }
            LabelLayout::Yolo { .. } => {
                let mut values = vec![0.0; boxes.len() * YOLO_LABEL_ROWS * 5];
                for (item, objects) in boxes.iter().enumerate() {
                    let kept = self.kept(objects).unwrap_or_default();
                    let slots = values[item * YOLO_LABEL_ROWS * 5..].chunks_exact_mut(5);
                    for (slot, o) in slots.zip(kept) {
                        let r = &o.rect;
                        slot.copy_from_slice(&[
                            (o.label - 1) as f32,
                            (r.xmin + r.xmax) / 2.0,
                            (r.ymin + r.ymax) / 2.0,
                            r.xmax - r.xmin,
                            r.ymax - r.ymin,
                        ]);
                    }
                }
                (vec![boxes.len(), 1, YOLO_LABEL_ROWS, 5], values)
            }
        }
    }
}

/// The fork's `GenerateJitterSamples`: with probability 0.8 a crop of
/// each side `1 - jitter` to 1 of the image (`jitter / 2` for a quarter
/// of those), at a random place, the sides equal where `keep_aspect`;
/// the whole image otherwise.
pub(crate) fn jitter_crop(rng: &mut SeededRng, jitter: f32, keep_aspect: bool) -> Rect {
    // The fork's `roll_weighted_die` over 0.2, 0.2 and 0.6.
    let roll = uniform(rng, 0.0, 1.0);
    let change = if roll <= 0.2 {
        0
    } else if roll <= 0.4 {
        1
    } else {
        2
    };
    if change == 0 {
        return Rect {
            xmin: 0.0,
            ymin: 0.0,
            xmax: 1.0,
            ymax: 1.0,
        };
    }
    let jitter = if change == 1 { jitter / 2.0 } else { jitter };
    let w = uniform(rng, 1.0 - jitter, 1.0);
    let h = if keep_aspect {
        w
    } else {
        uniform(rng, 1.0 - jitter, 1.0)
    };
    let x = uniform(rng, 0.0, 1.0 - w);
    let y = uniform(rng, 0.0, 1.0 - h);
    Rect {
        xmin: x,
        ymin: y,
        xmax: x + w,
        ymax: y + h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(label: i32, rect: [f32; 4], difficult: bool) -> Object {
        Object {
            label,
            instance: 0,
            rect: Rect {
                xmin: rect[0],
                ymin: rect[1],
                xmax: rect[2],
                ymax: rect[3],
            },
            difficult,
        }
    }

    #[test]
    fn yolo_rows_hold_each_images_boxes_by_centre_and_size() {
        let boxes = vec![
            vec![
                object(3, [0.1, 0.2, 0.5, 0.6], false),
                object(1, [0.0, 0.0, 1.0, 0.5], true),
            ],
            vec![],
        ];
        let (shape, v) = LabelLayout::Yolo {
            train_difficult: true,
        }
        .top(&boxes);
        assert_eq!(shape, [2, 1, 300, 5]);
        assert_eq!(v.len(), 2 * 1500);
        let want = [2.0, 0.3, 0.4, 0.4, 0.4];
        for (got, want) in v[..5].iter().zip(want) {
            assert!((got - want).abs() < 1e-6, "{:?}", &v[..5]);
        }
        assert_eq!(&v[5..10], &[0.0, 0.5, 0.25, 1.0, 0.5]);
        assert!(v[10..].iter().all(|&x| x == 0.0));
        // Difficult boxes left out.
        let (_, v) = LabelLayout::Yolo {
            train_difficult: false,
        }
        .top(&boxes);
        assert!(v[5..].iter().all(|&x| x == 0.0));
        // SSD's rows, and its row of -1 for none.
        let (shape, v) = LabelLayout::Ssd.top(&boxes);
        assert_eq!(shape, [1, 1, 2, 8]);
        assert_eq!(&v[8..], &[0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.5, 1.0]);
        assert_eq!(
            LabelLayout::Ssd.top(&[vec![]]),
            (vec![1, 1, 1, 8], vec![-1.0; 8])
        );
        // Too many for an image.
        let many = vec![object(1, [0.1, 0.1, 0.2, 0.2], false); 301];
        let e = LabelLayout::Yolo {
            train_difficult: true,
        }
        .kept(&many)
        .unwrap_err();
        assert!(e.contains("301 boxes, more than the 300"), "{e}");
    }

    #[test]
    fn jitter_crops_lie_in_the_image_at_their_sizes() {
        let mut rng = SeededRng::new(9);
        let mut whole = 0;
        for _ in 0..1000 {
            let r = jitter_crop(&mut rng, 0.3, false);
            let (w, h) = (r.xmax - r.xmin, r.ymax - r.ymin);
            assert!(r.xmin >= 0.0 && r.ymin >= 0.0 && r.xmax <= 1.0 + 1e-6 && r.ymax <= 1.0 + 1e-6);
            assert!(w >= 0.7 - 1e-6 && h >= 0.7 - 1e-6, "{r:?}");
            whole += usize::from(w == 1.0 && h == 1.0);
            let k = jitter_crop(&mut rng, 0.3, true);
            assert!(((k.xmax - k.xmin) - (k.ymax - k.ymin)).abs() < 1e-6);
        }
        // The whole image a fifth of the time.
        assert!((150..250).contains(&whole), "{whole}");
    }
}
