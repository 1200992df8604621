//! MTCNN's face detection cascade (Zhang et al. 2016, the authors' MATLAB
//! `detect_face.m`) on blobflow nets built from the authors' prototxts:
//! P-Net over an image pyramid (one net, reshaped per scale), R-Net on
//! 24 x 24 crops, O-Net on 48 x 48 crops with five landmarks, and
//! non-maximum suppression between the stages.
//!
//! The nets were trained through MATLAB, which hands Caffe column-major
//! arrays: they see images with x and y swapped. The crops and the
//! pyramid are fed transposed here, as the authors' code feeds them.

use std::path::Path;

use blobflow::layers::net::{Net, NetState};
use blobflow::runtime::CaffeModel;
use blobflow::{Blob, BlobError};

/// An RGB image, rows of `width` pixels, values 0..=255.
pub struct Image {
    pub width: usize,
    pub height: usize,
    /// `height * width * 3` values, row-major, RGB.
    pub pixels: Vec<f32>,
}

impl Image {
    fn at(&self, x: usize, y: usize, c: usize) -> f32 {
        self.pixels[(y * self.width + x) * 3 + c]
    }

    /// Bilinear resampling to `w x h` with pixel centres aligned (as
    /// OpenCV's `INTER_LINEAR` does).
    pub fn resized(&self, w: usize, h: usize) -> Image {
        let (sx, sy) = (self.width as f32 / w as f32, self.height as f32 / h as f32);
        let mut pixels = vec![0.0; w * h * 3];
        let coord = |d: usize, s: f32, n: usize| {
            let f = ((d as f32 + 0.5) * s - 0.5).max(0.0);
            let i = (f.floor() as usize).min(n - 1);
            (i, (i + 1).min(n - 1), (f - i as f32).min(1.0))
        };
        for y in 0..h {
            let (y0, y1, fy) = coord(y, sy, self.height);
            for x in 0..w {
                let (x0, x1, fx) = coord(x, sx, self.width);
                for c in 0..3 {
                    let top = self.at(x0, y0, c) * (1.0 - fx) + self.at(x1, y0, c) * fx;
                    let bottom = self.at(x0, y1, c) * (1.0 - fx) + self.at(x1, y1, c) * fx;
                    pixels[(y * w + x) * 3 + c] = top * (1.0 - fy) + bottom * fy;
                }
            }
        }
        Image {
            width: w,
            height: h,
            pixels,
        }
    }

    /// The box `(x1, y1)-(x2, y2)` (1-based, inclusive) cut out, parts
    /// outside the image left black (the authors' `pad`).
    fn crop(&self, b: &[f64; 4]) -> Image {
        let (x1, y1, x2, y2) = (b[0] as i64, b[1] as i64, b[2] as i64, b[3] as i64);
        let (w, h) = ((x2 - x1 + 1).max(1) as usize, (y2 - y1 + 1).max(1) as usize);
        let mut pixels = vec![0.0; w * h * 3];
        for y in 0..h {
            let sy = y1 - 1 + y as i64;
            if sy < 0 || sy >= self.height as i64 {
                continue;
            }
            for x in 0..w {
                let sx = x1 - 1 + x as i64;
                if sx < 0 || sx >= self.width as i64 {
                    continue;
                }
                for c in 0..3 {
                    pixels[(y * w + x) * 3 + c] = self.at(sx as usize, sy as usize, c);
                }
            }
        }
        Image {
            width: w,
            height: h,
            pixels,
        }
    }

    /// The net's input for this image: `(3, width, height)`, scaled to
    /// about [-1, 1], x and y swapped as MATLAB fed the nets.
    fn transposed_input(&self, out: &mut [f32]) {
        let (w, h) = (self.width, self.height);
        for c in 0..3 {
            for x in 0..w {
                for y in 0..h {
                    out[(c * w + x) * h + y] = (self.at(x, y, c) - 127.5) * 0.0078125;
                }
            }
        }
    }
}

/// A detected face: its box (1-based pixels, inclusive), probability and
/// landmarks (left eye, right eye, nose, left and right mouth corners).
#[derive(Clone, Debug)]
pub struct Face {
    pub x1: f64,
    pub y1: f64,
    pub x2: f64,
    pub y2: f64,
    pub score: f64,
    pub landmarks: [(f64, f64); 5],
}

/// A candidate box: corners, score, and the regression its net gave.
#[derive(Clone, Debug)]
struct Candidate {
    b: [f64; 4],
    score: f64,
    reg: [f64; 4],
}

/// The authors' `nms`: highest score first, dropping boxes that overlap a
/// kept one by more than `threshold` (intersection over union, or over
/// the smaller box for `min`).
fn nms(boxes: &[Candidate], threshold: f64, min: bool) -> Vec<usize> {
    let area = |b: &[f64; 4]| (b[2] - b[0] + 1.0) * (b[3] - b[1] + 1.0);
    let mut order: Vec<usize> = (0..boxes.len()).collect();
    order.sort_by(|&a, &b| boxes[a].score.total_cmp(&boxes[b].score));
    let mut keep = Vec::new();
    while let Some(best) = order.pop() {
        keep.push(best);
        let a = &boxes[best].b;
        order.retain(|&o| {
            let b = &boxes[o].b;
            let w = (a[2].min(b[2]) - a[0].max(b[0]) + 1.0).max(0.0);
            let h = (a[3].min(b[3]) - a[1].max(b[1]) + 1.0).max(0.0);
            let inter = w * h;
            let overlap = if min {
                inter / area(a).min(area(b))
            } else {
                inter / (area(a) + area(b) - inter)
            };
            overlap <= threshold
        });
    }
    keep
}

/// The authors' `rerec`: each box made square around its centre.
fn square(c: &mut Candidate) {
    let (w, h) = (c.b[2] - c.b[0], c.b[3] - c.b[1]);
    let l = w.max(h);
    c.b[0] += w * 0.5 - l * 0.5;
    c.b[1] += h * 0.5 - l * 0.5;
    c.b[2] = c.b[0] + l;
    c.b[3] = c.b[1] + l;
}

/// The authors' `bbreg`: a box moved by its regression, in box sizes.
fn regress(c: &mut Candidate) {
    let (w, h) = (c.b[2] - c.b[0] + 1.0, c.b[3] - c.b[1] + 1.0);
    for k in 0..4 {
        c.b[k] += c.reg[k] * if k % 2 == 0 { w } else { h };
    }
}

/// The three nets of the cascade.
pub struct Mtcnn {
    pnet: Net<f32>,
    rnet: Net<f32>,
    onet: Net<f32>,
}

impl Mtcnn {
    /// The nets from `dir`'s `det1..3.prototxt` and `.caffemodel`s.
    pub fn open(dir: &Path) -> Result<Self, BlobError> {
        let net = |name: &str| -> Result<Net<f32>, BlobError> {
            let mut net = Net::from_file(dir.join(format!("{name}.prototxt")), NetState::test())?;
            net.copy_from(&CaffeModel::open(dir.join(format!("{name}.caffemodel")))?)?;
            Ok(net)
        };
        Ok(Self {
            pnet: net("det1")?,
            rnet: net("det2")?,
            onet: net("det3")?,
        })
    }

    /// Moves the three nets to a device (a GPU).
    #[cfg(feature = "cuda")]
    pub fn move_to(
        &mut self,
        device: std::sync::Arc<dyn blobflow::runtime::DeviceBackend>,
    ) -> Result<(), BlobError> {
        for net in [&mut self.pnet, &mut self.rnet, &mut self.onet] {
            net.to_device(device.clone())?;
        }
        Ok(())
    }

    /// The input blob of `net`, reshaped to `shape` and filled by `fill`.
    fn feed(
        net: &mut Net<f32>,
        shape: &[usize],
        fill: impl FnOnce(&mut [f32]),
    ) -> Result<(), BlobError> {
        let data = net.blob_mut("data").expect("MTCNN's nets read 'data'");
        data.reshape(shape)?;
        fill(&mut data.mutable_cpu_data()?);
        Ok(())
    }

    fn output(net: &Net<f32>, name: &str) -> Result<Vec<f32>, BlobError> {
        net.blob(name).map(Blob::to_vec).expect("MTCNN's outputs")
    }

    /// The pyramid's scales for faces of at least `min_size` pixels, and
    /// how many scales P-Net ran.
    fn scales(image: &Image, min_size: f64) -> Vec<f64> {
        let m = 12.0 / min_size;
        let mut side = image.width.min(image.height) as f64 * m;
        let mut scales = Vec::new();
        let mut scale = m;
        while side >= 12.0 {
            scales.push(scale);
            scale *= 0.709;
            side *= 0.709;
        }
        scales
    }

    /// P-Net over every scale (largest first: the net's memory is sized
    /// once), candidates merged by NMS, regressed and squared.
    fn proposals(&mut self, image: &Image, threshold: f64) -> Result<Vec<Candidate>, BlobError> {
        let mut all = Vec::new();
        for scale in Self::scales(image, 20.0) {
            let hs = (image.height as f64 * scale).ceil() as usize;
            let ws = (image.width as f64 * scale).ceil() as usize;
            let scaled = image.resized(ws, hs);
            Self::feed(&mut self.pnet, &[1, 3, ws, hs], |d| {
                scaled.transposed_input(d)
            })?;
            self.pnet.forward()?;
            let prob = Self::output(&self.pnet, "prob1")?;
            let reg = Self::output(&self.pnet, "conv4-2")?;
            let shape = self.pnet.blob("prob1").expect("an output").shape().to_vec();
            let (ho, wo) = (shape[2], shape[3]);
            let plane = ho * wo;
            let mut found = Vec::new();
            // Map axis 2 runs over the image's x, axis 3 over its y.
            for x in 0..ho {
                for y in 0..wo {
                    let at = x * wo + y;
                    let score = f64::from(prob[plane + at]);
                    if score < threshold {
                        continue;
                    }
                    let corner = |v: usize, extra: f64| ((2.0 * v as f64 + extra) / scale).trunc();
                    found.push(Candidate {
                        b: [
                            corner(x, 1.0),
                            corner(y, 1.0),
                            corner(x, 12.0),
                            corner(y, 12.0),
                        ],
                        score,
                        reg: [0, 1, 2, 3].map(|k| f64::from(reg[k * plane + at])),
                    });
                }
            }
            let keep = nms(&found, 0.5, false);
            all.extend(keep.into_iter().map(|i| found[i].clone()));
        }
        let keep = nms(&all, 0.7, false);
        let mut out: Vec<Candidate> = keep.into_iter().map(|i| all[i].clone()).collect();
        for c in &mut out {
            // P-Net's regression is in box sizes without the +1.
            let (w, h) = (c.b[2] - c.b[0], c.b[3] - c.b[1]);
            for k in 0..4 {
                c.b[k] += c.reg[k] * if k % 2 == 0 { w } else { h };
            }
            square(c);
            c.b = c.b.map(f64::trunc);
        }
        Ok(out)
    }

    /// Runs `net` on `side x side` crops of `boxes`.
    fn crops(
        net: &mut Net<f32>,
        image: &Image,
        boxes: &[Candidate],
        side: usize,
    ) -> Result<(), BlobError> {
        let per = 3 * side * side;
        Self::feed(net, &[boxes.len(), 3, side, side], |d| {
            for (c, chunk) in boxes.iter().zip(d.chunks_exact_mut(per)) {
                image.crop(&c.b).resized(side, side).transposed_input(chunk);
            }
        })?;
        net.forward()?;
        Ok(())
    }

    /// The faces in `image`, with the authors' thresholds (0.6, 0.7, 0.7).
    pub fn detect(&mut self, image: &Image) -> Result<Vec<Face>, BlobError> {
        let mut boxes = self.proposals(image, 0.6)?;
        if boxes.is_empty() {
            return Ok(Vec::new());
        }
        Self::crops(&mut self.rnet, image, &boxes, 24)?;
        let prob = Self::output(&self.rnet, "prob1")?;
        let reg = Self::output(&self.rnet, "conv5-2")?;
        let mut passed: Vec<Candidate> = Vec::new();
        for (i, c) in boxes.iter().enumerate() {
            let score = f64::from(prob[2 * i + 1]);
            if score > 0.7 {
                passed.push(Candidate {
                    b: c.b,
                    score,
                    reg: [0, 1, 2, 3].map(|k| f64::from(reg[4 * i + k])),
                });
            }
        }
        let keep = nms(&passed, 0.7, false);
        boxes = keep.into_iter().map(|i| passed[i].clone()).collect();
        for c in &mut boxes {
            regress(c);
            square(c);
            c.b = c.b.map(f64::trunc);
        }
        if boxes.is_empty() {
            return Ok(Vec::new());
        }
        Self::crops(&mut self.onet, image, &boxes, 48)?;
        let prob = Self::output(&self.onet, "prob1")?;
        let reg = Self::output(&self.onet, "conv6-2")?;
        let points = Self::output(&self.onet, "conv6-3")?;
        let mut faces = Vec::new();
        let mut candidates = Vec::new();
        for (i, c) in boxes.iter().enumerate() {
            let score = f64::from(prob[2 * i + 1]);
            if score <= 0.7 {
                continue;
            }
            let (w, h) = (c.b[2] - c.b[0] + 1.0, c.b[3] - c.b[1] + 1.0);
            let p = &points[10 * i..10 * i + 10];
            let landmarks = [0, 1, 2, 3, 4].map(|k| {
                (
                    w * f64::from(p[k]) + c.b[0] - 1.0,
                    h * f64::from(p[k + 5]) + c.b[1] - 1.0,
                )
            });
            let mut found = Candidate {
                b: c.b,
                score,
                reg: [0, 1, 2, 3].map(|k| f64::from(reg[4 * i + k])),
            };
            regress(&mut found);
            candidates.push(found);
            faces.push(landmarks);
        }
        Ok(nms(&candidates, 0.7, true)
            .into_iter()
            .map(|i| {
                let c = &candidates[i];
                Face {
                    x1: c.b[0],
                    y1: c.b[1],
                    x2: c.b[2],
                    y2: c.b[3],
                    score: c.score,
                    landmarks: faces[i],
                }
            })
            .collect())
    }
}

/// Reads an 8-bit RGB (or RGBA, or grey) PNG.
pub fn read_png(path: &Path) -> Result<Image, Box<dyn std::error::Error>> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder
        .read_info()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut buf = vec![
        0;
        reader
            .output_buffer_size()
            .ok_or("the image is too large")?
    ];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let channels = info.color_type.samples();
    let (width, height) = (info.width as usize, info.height as usize);
    let mut pixels = Vec::with_capacity(width * height * 3);
    for px in buf[..info.buffer_size()].chunks_exact(channels) {
        match channels {
            1 | 2 => pixels.extend([f32::from(px[0]); 3]),
            _ => pixels.extend(px[..3].iter().map(|&v| f32::from(v))),
        }
    }
    Ok(Image {
        width,
        height,
        pixels,
    })
}
