//! Model files: a saved model loads back bit-identically and predicts the same; files whose
//! shapes disagree with themselves or with the model are refused with a message naming the tensor.

use std::collections::BTreeMap;

use lmzip::model::Network;
use lmzip::model::mamba1::{self, Mamba1};
use lmzip::model::rwkv7::{self, Rwkv7};
use lmzip::modelfile::{ModelFile, load, to_bytes};
use lmzip::params::ParamSet;

/// The output bias a predictor's model file may carry, after the network's tensors.
const BIAS: &[(&str, &[usize], u8)] = &[("output_bias", &[256], 0)];

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn logits_after<N: Network>(net: &mut N, params: &ParamSet, text: &[u8]) -> Vec<u32> {
    let mut state = net.new_state();
    let mut last = Vec::new();
    for &b in text {
        last = bits(net.forward(params, &mut state, b, None));
    }
    last
}

/// Saves `params` with an output bias appended, as a predictor's model file holds it.
fn saved(params: &ParamSet) -> ModelFile {
    let mut with_bias = params.clone();
    let bias = with_bias.add("output_bias", &[256], 0);
    with_bias.get_mut(bias)[65] = 0.75;
    let bytes = to_bytes(&with_bias, &[], &BTreeMap::new()).unwrap();
    ModelFile::from_bytes(&bytes).unwrap()
}

#[test]
fn rwkv7_saved_model_loads_back_bit_identically() {
    let cfg = rwkv7::Config {
        hidden: 64,
        layers: 2,
        intermediate: 96,
        decay_rank: 8,
        a_rank: 4,
        v_rank: 6,
        g_rank: 10,
    };
    let (mut net, params) = Rwkv7::new_random(cfg.clone(), 3).unwrap();
    let file = saved(&params);
    let (mut loaded, loaded_params) = load::<Rwkv7>(&file, BIAS).unwrap();
    assert_eq!(loaded.config(), &cfg, "config read off the shapes");
    assert_eq!(
        bits(&loaded_params.data[..params.len()]),
        bits(&params.data)
    );
    assert_eq!(
        loaded_params
            .find("output_bias")
            .unwrap()
            .slot
            .of(&loaded_params.data)[65],
        0.75
    );
    let text = b"a saved model predicts the same";
    assert_eq!(
        logits_after(&mut net, &params, text),
        logits_after(&mut loaded, &loaded_params, text)
    );
}

#[test]
fn mamba1_saved_model_loads_back_bit_identically() {
    let cfg = mamba1::Config {
        hidden: 24,
        layers: 2,
        inner: 40,
        state: 6,
        conv: 3,
        dt_rank: 5,
        ctx: 0,
        prior: 0,
    };
    let (mut net, params) = Mamba1::new_random(cfg.clone(), 4).unwrap();
    let file = saved(&params);
    let (mut loaded, loaded_params) = load::<Mamba1>(&file, BIAS).unwrap();
    assert_eq!(loaded.config(), &cfg);
    assert_eq!(
        bits(&loaded_params.data[..params.len()]),
        bits(&params.data)
    );
    let text = b"a saved model predicts the same";
    assert_eq!(
        logits_after(&mut net, &params, text),
        logits_after(&mut loaded, &loaded_params, text)
    );
}

#[test]
fn files_whose_shapes_disagree_are_refused_with_the_tensor_named() {
    let (_, params) = Rwkv7::new_random(rwkv7::Config::default(), 1).unwrap();
    let mut file = saved(&params);
    // A block whose key projection is narrower than the config the other tensors give.
    let t = file
        .tensors
        .get_mut("model.layers.1.attn.k_proj.weight")
        .unwrap();
    t.shape = vec![64, 128];
    t.data.truncate(64 * 128);
    let err = format!("{:#}", load::<Rwkv7>(&file, BIAS).err().unwrap());
    assert!(err.contains("model.layers.1.attn.k_proj.weight"), "{err}");

    let mut file = saved(&params);
    file.tensors.remove("model.layers.0.ffn.value.weight");
    let err = format!("{:#}", load::<Rwkv7>(&file, BIAS).err().unwrap());
    assert!(err.contains("model.layers.0.ffn.value.weight"), "{err}");

    // A Mamba file is not an RWKV file: the first tensor one model needs and the other lacks
    // is named.
    let (_, mparams) = Mamba1::new_random(mamba1::Config::default(), 1).unwrap();
    let err = format!("{:#}", load::<Rwkv7>(&saved(&mparams), BIAS).err().unwrap());
    assert!(
        err.contains("model file lacks tensor model.layers.0."),
        "{err}"
    );
    let err = format!("{:#}", load::<Mamba1>(&saved(&params), BIAS).err().unwrap());
    assert!(
        err.contains("model file lacks tensor model.layers.0.mixer."),
        "{err}"
    );
}
