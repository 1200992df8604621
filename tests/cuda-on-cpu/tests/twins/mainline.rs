//! Caffe's mainline layers' kernels (`tile.cu`, `reduction.cu`, `mvn.cu`,
//! `embed.cu`, `batch_reindex.cu`, `lstm_unit.cu`, `recurrent.cu`) against the CPU sides of
//! their layers.

use blob_layers::registry::LayerRegistry;
use blob_runtime::Blob;
use cuda_on_cpu as k;

use crate::{assert_close, random, run_on_cpu};

#[test]
fn tile_copies_and_adds_back_as_the_cpu() {
    let (outer, inner, tiles) = (6, 20, 3);
    let x = random(outer * inner, 1, -1.0, 1.0);
    let dy = random(outer * inner * tiles, 2, -1.0, 1.0);
    let want = run_on_cpu(
        "type: 'Tile' tile_param { axis: 1 tiles: 3 }",
        &[],
        (&[6, 4, 5], &x),
        (&[6, 12, 5], &dy),
    );
    let (n_out, n_in) = (outer * inner * tiles, outer * inner);
    let (mut y, mut dx) = (vec![f32::NAN; n_out], vec![f32::NAN; n_in]);
    // SAFETY: x and dx hold outer x inner values, y and dy outer x tiles x inner.
    unsafe {
        k::tile_forward_f32(n_out, n_out as i64, inner as i64, tiles as i64, &x, &mut y);
        k::tile_backward_f32(n_in, n_in as i64, inner as i64, tiles as i64, &dy, &mut dx);
    }
    assert_close("tile", &y, &want.y, 0.0);
    assert_close("tile gradient", &dx, &want.dx, 0.0);
}

#[test]
fn reductions_sum_in_double_as_the_cpu() {
    let (outer, dim) = (6, 20);
    let x = random(outer * dim, 3, -1.0, 1.0);
    let dy = random(outer, 4, -1.0, 1.0);
    for (op, name) in ["SUM", "ASUM", "SUMSQ", "MEAN"].into_iter().enumerate() {
        let text = format!(
            "type: 'Reduction' reduction_param {{ operation: {name} axis: 1 coeff: -1.5 }}"
        );
        let want = run_on_cpu(&text, &[], (&[6, 4, 5], &x), (&[6], &dy));
        let scale = if name == "MEAN" {
            -1.5 / dim as f64
        } else {
            -1.5
        };
        let (mut y, mut dx) = (vec![f32::NAN; outer], vec![f32::NAN; outer * dim]);
        let (o, d, n) = (outer as i64, dim as i64, (outer * dim) as i64);
        // SAFETY: x and dx hold outer x dim values, y and dy outer.
        unsafe {
            k::reduction_forward_f32(outer, o, d, op as i32, -1.5, &x, &mut y);
            k::reduction_backward_f32(outer * dim, n, d, op as i32, scale, &x, &dy, &mut dx);
        }
        assert_close(name, &y, &want.y, 0.0);
        assert_close(&format!("{name} gradient"), &dx, &want.dx, 0.0);
    }
}

#[test]
fn mvn_normalizes_each_group_as_the_cpu() {
    let shape = [3, 4, 5, 6];
    let n: usize = shape.iter().product();
    let x = random(n, 5, -2.0, 3.0);
    let dy = random(n, 6, -1.0, 1.0);
    for (variance, across) in [(true, false), (false, false), (true, true)] {
        let text = format!(
            "type: 'MVN' mvn_param {{ normalize_variance: {variance} across_channels: {across} eps: 1e-6 }}"
        );
        let want = run_on_cpu(&text, &[], (&shape, &x), (&shape, &dy));
        let dim = if across { 4 * 5 * 6 } else { 5 * 6 };
        let groups = n / dim;
        let (mut y, mut dx) = (vec![f32::NAN; n], vec![f32::NAN; n]);
        let (g, d, nv) = (groups as i64, dim as i64, i32::from(variance));
        // SAFETY: x, y, dy and dx hold groups x dim values.
        unsafe {
            k::mvn_forward_f32(groups, g, d, nv, 1e-6, &x, &mut y);
            k::mvn_backward_f32(groups, g, d, nv, 1e-6, &x, &want.y, &dy, &mut dx);
        }
        assert_close(&text, &y, &want.y, 0.0);
        assert_close(&format!("{text} gradient"), &dx, &want.dx, 0.0);
    }
}

#[test]
fn embed_picks_rows_and_adds_gradients_by_row_as_the_cpu() {
    let (rows, outputs) = (7, 5);
    // Repeats, so that one row's gradient adds several in order.
    let index: Vec<f32> = [3., 0., 6., 3., 3., 1., 0., 6.].to_vec();
    let count = index.len();
    let weight = random(rows * outputs, 7, -0.5, 0.5);
    let bias = random(outputs, 8, -0.5, 0.5);
    let dy = random(count * outputs, 9, -1.0, 1.0);
    for with_bias in [true, false] {
        let text = format!(
            "type: 'Embed' embed_param {{ num_output: 5 input_dim: 7 bias_term: {with_bias} }}"
        );
        let params: Vec<Vec<f32>> = if with_bias {
            vec![weight.clone(), bias.clone()]
        } else {
            vec![weight.clone()]
        };
        // Embed takes no gradient to its indices: the layer runs by hand.
        let mut layer = LayerRegistry::<f32>::with_caffe_layers()
            .build_text(&text)
            .unwrap();
        let x = Blob::from_vec(&[2, 4], index.clone()).unwrap();
        let mut top = Blob::<f32>::default();
        let shapes = layer.reshape(&[&x], &[&top]).unwrap();
        top.reshape(&shapes[0].dims).unwrap();
        for (blob, values) in layer.blobs().iter().zip(&params) {
            blob.mutable_cpu_data().unwrap().copy_from_slice(values);
            blob.mutable_cpu_diff().unwrap().fill(0.25);
        }
        layer.forward(&[&x], &[&top]).unwrap();
        top.mutable_cpu_diff().unwrap().copy_from_slice(&dy);
        layer.backward(&[&top], &[false], &[&x]).unwrap();
        let want_y = top.to_vec().unwrap();
        let want_dw = layer.blobs()[0].diff_to_vec().unwrap();

        let mut y = vec![f32::NAN; count * outputs];
        let (mut dw, mut db) = (vec![0.25; rows * outputs], vec![0.25; outputs]);
        let (n, o, c) = ((count * outputs) as i64, outputs as i64, count as i64);
        // SAFETY: index holds count rows below `rows`, weight and dw rows x
        // outputs values, bias and db outputs, y and dy count x outputs.
        unsafe {
            k::embed_forward_f32(
                count * outputs,
                n,
                o,
                &index,
                &weight,
                &bias,
                i32::from(with_bias),
                &mut y,
            );
            k::embed_weight_backward_f32(outputs, o, c, &index, &dy, &mut dw);
            k::embed_bias_backward_f32(outputs, o, c, &dy, &mut db);
        }
        assert_close(&text, &y, &want_y, 0.0);
        assert_close(&format!("{text} weight gradient"), &dw, &want_dw, 0.0);
        if with_bias {
            let want_db = layer.blobs()[1].diff_to_vec().unwrap();
            assert_close(&format!("{text} bias gradient"), &db, &want_db, 0.0);
        }
    }
}

#[test]
fn batch_reindex_gathers_and_adds_back_as_the_cpu() {
    let (items, inner) = (4, 6);
    let index: Vec<f32> = [2., 0., 2., 3., 2.].to_vec();
    let picks = index.len();
    let x = random(items * inner, 10, -1.0, 1.0);
    let dy = random(picks * inner, 11, -1.0, 1.0);
    let mut layer = LayerRegistry::<f32>::with_caffe_layers()
        .build_text("type: 'BatchReindex'")
        .unwrap();
    let data = Blob::from_vec(&[items, 2, 3], x.clone()).unwrap();
    let idx = Blob::from_vec(&[picks], index.clone()).unwrap();
    let mut top = Blob::<f32>::default();
    let shapes = layer.reshape(&[&data, &idx], &[&top]).unwrap();
    top.reshape(&shapes[0].dims).unwrap();
    layer.forward(&[&data, &idx], &[&top]).unwrap();
    top.mutable_cpu_diff().unwrap().copy_from_slice(&dy);
    layer
        .backward(&[&top], &[true, false], &[&data, &idx])
        .unwrap();

    let (mut y, mut dx) = (vec![f32::NAN; picks * inner], vec![f32::NAN; items * inner]);
    let (i, n, p) = (inner as i64, items as i64, picks as i64);
    // SAFETY: index holds picks item numbers below items; x and dx hold
    // items x inner values, y and dy picks x inner.
    unsafe {
        k::batch_reindex_forward_f32(picks * inner, (picks * inner) as i64, i, &index, &x, &mut y);
        k::batch_reindex_backward_f32(inner, i, n, p, &index, &dy, &mut dx);
    }
    assert_close("batch reindex", &y, &top.to_vec().unwrap(), 0.0);
    assert_close(
        "batch reindex gradient",
        &dx,
        &data.diff_to_vec().unwrap(),
        0.0,
    );
}

#[test]
fn lstm_unit_steps_and_differentiates_as_the_cpu() {
    let (items, hidden) = (3, 4);
    let units = items * hidden;
    let c_prev = random(units, 12, -1.0, 1.0);
    let x = random(4 * units, 13, -2.0, 2.0);
    let cont: Vec<f32> = vec![1., 0., 1.];
    let (dc, dh) = (random(units, 14, -1.0, 1.0), random(units, 15, -1.0, 1.0));
    let mut layer = LayerRegistry::<f32>::with_caffe_layers()
        .build_text("type: 'LSTMUnit'")
        .unwrap();
    let bottoms = [
        Blob::from_vec(&[1, items, hidden], c_prev.clone()).unwrap(),
        Blob::from_vec(&[1, items, 4 * hidden], x.clone()).unwrap(),
        Blob::from_vec(&[1, items], cont.clone()).unwrap(),
    ];
    let refs: Vec<&Blob<f32>> = bottoms.iter().collect();
    let (mut c_top, mut h_top) = (Blob::<f32>::default(), Blob::<f32>::default());
    let shapes = layer.reshape(&refs, &[&c_top, &h_top]).unwrap();
    c_top.reshape(&shapes[0].dims).unwrap();
    h_top.reshape(&shapes[1].dims).unwrap();
    layer.forward(&refs, &[&c_top, &h_top]).unwrap();
    c_top.mutable_cpu_diff().unwrap().copy_from_slice(&dc);
    h_top.mutable_cpu_diff().unwrap().copy_from_slice(&dh);
    layer
        .backward(&[&c_top, &h_top], &[true, true, false], &refs)
        .unwrap();

    let (mut c, mut h) = (vec![f32::NAN; units], vec![f32::NAN; units]);
    let (mut dc_prev, mut dx) = (vec![f32::NAN; units], vec![f32::NAN; 4 * units]);
    let (u, hh) = (units as i64, hidden as i64);
    // SAFETY: c_prev, c, h, dc, dh and dc_prev hold items x hidden values,
    // x and dx 4 times that, cont items.
    unsafe {
        k::lstm_unit_forward_f32(units, u, hh, &c_prev, &x, &cont, &mut c, &mut h);
        k::lstm_unit_backward_f32(
            units,
            u,
            hh,
            &c_prev,
            &x,
            &cont,
            &dc,
            &dh,
            &mut dc_prev,
            &mut dx,
        );
    }
    assert_close("LSTMUnit c", &c, &c_top.to_vec().unwrap(), 1e-7);
    assert_close("LSTMUnit h", &h, &h_top.to_vec().unwrap(), 1e-7);
    assert_close(
        "LSTMUnit dc_prev",
        &dc_prev,
        &bottoms[0].diff_to_vec().unwrap(),
        1e-7,
    );
    assert_close("LSTMUnit dx", &dx, &bottoms[1].diff_to_vec().unwrap(), 1e-7);
}

/// The recurrent layers' step glue (`recurrent.cu`): the previous
/// state masked by `cont`, one flag an item, as RNN's and LSTM's CPU side
/// masks it (out of place and in place), and TanH's gradient from its
/// input in double, as RNN's CPU side takes it (`1 - tanh(x)^2` in f64).
#[test]
fn recurrent_glue_masks_and_differentiates_as_the_cpu() {
    let (items, hidden) = (3, 5);
    let n = items * hidden;
    let src = random(n, 16, -1.0, 1.0);
    let cont: Vec<f32> = vec![1., 0., 1.];
    let want: Vec<f32> = src
        .iter()
        .enumerate()
        .map(|(i, v)| v * cont[i / hidden])
        .collect();
    let (mut dst, mut y) = (vec![f32::NAN; n], src.clone());
    let (total, h) = (n as i64, hidden as i64);
    // SAFETY: src, dst and y hold items x hidden values, cont items.
    unsafe {
        k::mask_rows_f32(n, total, h, &src, &cont, &mut dst);
        k::mask_rows_inplace_f32(n, total, h, &cont, &mut y);
    }
    assert_close("masked state", &dst, &want, 0.0);
    assert_close("masked state in place", &y, &want, 0.0);
    // Saturated units included: from an f32 output, 1 - y^2 would keep
    // few digits there.
    let x = random(n, 17, -6.0, 6.0);
    let dy = random(n, 18, -1.0, 1.0);
    let want: Vec<f32> = x
        .iter()
        .zip(&dy)
        .map(|(&x, &d)| {
            let t = f64::from(x).tanh();
            (f64::from(d) * (1.0 - t * t)) as f32
        })
        .collect();
    let mut dx = vec![f32::NAN; n];
    // SAFETY: x, dy and dx hold n values.
    unsafe { k::tanh_backward_from_input_f32(n, total, &x, &dy, &mut dx) };
    assert_close("TanH gradient from its input", &dx, &want, 1e-7);
}
