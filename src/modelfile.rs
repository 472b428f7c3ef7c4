//! Model files: safetensors, read through a memory map with F32, F16 and BF16 tensors (the two
//! half formats widened exactly to f32), written as F32 with the tensor names of the model
//! layouts.
//!
//! A model builds its parameter registry from a configuration; loading a file means inferring
//! that configuration from the tensor shapes (each model knows how), building the registry, and
//! filling every tensor by name with [`fill_params`], which refuses missing, extra or misshapen
//! tensors with a message that names them. Files in the official Mamba layout
//! (`backbone.*`) are converted to the native layout first ([`ModelFile::native`]). Tensors and
//! metadata under `lmzip.` carry what resumes a stream (src/resume.rs); the models ignore them.
//!
//! A [`Weights`] is a model file as a run uses it: its tensors, and the SHA-256 of its bytes,
//! which a header records so that the decoder starts from the very same file.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};
use safetensors::{Dtype, SafeTensors};
use sha2::{Digest, Sha256};

use crate::model::Build;
use crate::model::{mamba1, rwkv7};
use crate::params::{Group, ParamSet, TensorSource};
use crate::recipe::{Base, ModelConfig, ModelKind, hex};

/// Names of tensors and metadata keys that are not weights but resume data.
pub const RESUME_PREFIX: &str = "lmzip.";

/// Largest model file accepted (bytes): far above any model this build trains.
pub const MAX_FILE: u64 = 4 << 30;

/// One tensor of a model file, widened to f32.
#[derive(Clone, Debug, PartialEq)]
pub struct FileTensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// The tensors and metadata of a model file.
#[derive(Clone, Debug, Default)]
pub struct ModelFile {
    pub tensors: BTreeMap<String, FileTensor>,
    pub metadata: BTreeMap<String, String>,
}

impl TensorSource for ModelFile {
    fn tensor_shape(&self, name: &str) -> Option<&[usize]> {
        self.tensors.get(name).map(|t| t.shape.as_slice())
    }
}

impl ModelFile {
    /// Reads a safetensors file.
    pub fn open(path: &Path) -> Result<Self> {
        Ok(Weights::open(path)?.file)
    }

    /// Parses safetensors bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let st = SafeTensors::deserialize(bytes)
            .map_err(|e| anyhow::anyhow!("not a safetensors file ({e})"))?;
        let mut tensors = BTreeMap::new();
        for (name, view) in st.tensors() {
            let data =
                widen(view.dtype(), view.data()).with_context(|| format!("tensor {name}"))?;
            tensors.insert(
                name,
                FileTensor {
                    shape: view.shape().to_vec(),
                    data,
                },
            );
        }
        let (_, meta) = SafeTensors::read_metadata(bytes).map_err(|e| anyhow::anyhow!("{e}"))?;
        let metadata = meta
            .metadata()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        Ok(ModelFile { tensors, metadata })
    }

    /// The tensor `name`, which must have `shape`; `source` says what the file is in messages
    /// ("model file", "the checkpoint").
    pub fn shaped(&self, name: &str, shape: &[usize], source: &str) -> Result<&FileTensor> {
        let t = self
            .tensors
            .get(name)
            .with_context(|| format!("{source} lacks tensor {name}"))?;
        if t.shape != shape {
            bail!(
                "tensor {name} has shape {:?} in {source}, but {shape:?} is needed",
                t.shape
            );
        }
        Ok(t)
    }

    /// The tensors named `prefix` + each parameter tensor's name, laid out like `params` (Adam's
    /// moments in resume data and checkpoints); `source` as for [`ModelFile::shaped`].
    pub fn laid_out_like(&self, params: &ParamSet, prefix: &str, source: &str) -> Result<Vec<f32>> {
        let mut buf = params.zeros_like();
        for t in &params.tensors {
            let saved = self.shaped(&format!("{prefix}{}", t.name), &t.shape, source)?;
            t.slot.of_mut(&mut buf).copy_from_slice(&saved.data);
        }
        Ok(buf)
    }

    /// Which model the file holds, and in which layout.
    pub fn layout(&self) -> Result<Layout> {
        let has = |n: &str| self.tensors.contains_key(n);
        if has("backbone.embedding.weight") {
            Ok(Layout::Mamba1Official)
        } else if has("model.layers.0.mixer.in_proj.weight") {
            Ok(Layout::Mamba1)
        } else if has("model.layers.0.attn.r_proj.weight") {
            Ok(Layout::Rwkv7)
        } else {
            bail!(
                "not a model lmzip knows: no backbone.embedding.weight (official Mamba), \
                 model.layers.0.mixer.in_proj.weight (Mamba-1) or \
                 model.layers.0.attn.r_proj.weight (RWKV-7)"
            )
        }
    }

    /// The file in lmzip's native layout: itself, or the conversion of an official Mamba file.
    pub fn native(&self) -> Result<Cow<'_, ModelFile>> {
        Ok(match self.layout()? {
            Layout::Mamba1Official => Cow::Owned(self.official_mamba_to_native()?),
            Layout::Mamba1 | Layout::Rwkv7 => Cow::Borrowed(self),
        })
    }

    /// The sizes of the network the file holds, read off its tensor shapes.
    pub fn config(&self) -> Result<ModelConfig> {
        let native = self.native()?;
        Ok(match self.layout()? {
            Layout::Mamba1 | Layout::Mamba1Official => {
                ModelConfig::Mamba1(mamba1::Config::infer(native.as_ref())?)
            }
            Layout::Rwkv7 => ModelConfig::Rwkv7(rwkv7::Config::infer(native.as_ref())?),
        })
    }

    /// Converts the official Mamba layout (`backbone.embedding.weight`,
    /// `backbone.layers.N.mixer.*`, `backbone.norm_f.weight`, `lm_head.weight`) to the native one
    /// (`model.*`):
    ///
    /// - the convolution's taps are reversed. The official model is PyTorch's causal `Conv1d`,
    ///   whose tap K−1 multiplies the newest input (`causal_conv1d_update` rolls the window left
    ///   and writes the newest input last); lmzip's tap 0 multiplies the newest input. (The
    ///   reference system copies official taps unchanged, so it runs official checkpoints with
    ///   the kernel reversed in time; lmzip follows PyTorch.) `[I, K]` kernels become `[I, 1, K]`;
    /// - a missing `lm_head.weight` means the head is tied to the embedding: it is copied (lmzip
    ///   then trains the two apart);
    /// - biases the official blocks leave out (`in_proj`, `out_proj`, and `conv1d` when built
    ///   without) are zero, which is what leaving them out computes.
    pub fn official_mamba_to_native(&self) -> Result<ModelFile> {
        let mut out = ModelFile {
            tensors: BTreeMap::new(),
            metadata: self.metadata.clone(),
        };
        for (name, t) in &self.tensors {
            let native = match name.as_str() {
                n if n.starts_with(RESUME_PREFIX) => n.to_string(),
                "backbone.embedding.weight" => "model.embeddings.weight".to_string(),
                "backbone.norm_f.weight" | "norm_f.weight" => "model.norm.weight".to_string(),
                "lm_head.weight" => name.clone(),
                n => match n.strip_prefix("backbone.layers.") {
                    Some(rest) => format!("model.layers.{rest}"),
                    None => bail!("tensor {n} is not part of the official Mamba layout"),
                },
            };
            let mut t = t.clone();
            if native.ends_with(".mixer.conv1d.weight") {
                let (channels, taps) = match t.shape.as_slice() {
                    &[i, 1, k] | &[i, k] => (i, k),
                    other => bail!("tensor {name} has shape {other:?}, expected [I, 1, K]"),
                };
                for ch in t.data.chunks_exact_mut(taps.max(1)) {
                    ch.reverse();
                }
                t.shape = vec![channels, 1, taps];
            }
            if out.tensors.insert(native.clone(), t).is_some() {
                bail!("model file has two tensors for {native}");
            }
        }
        if !out.tensors.contains_key("lm_head.weight") {
            let tied = out.tensors.get("model.embeddings.weight").cloned();
            if let Some(tied) = tied {
                out.tensors.insert("lm_head.weight".into(), tied);
            }
        }
        let layers = out.count_layers("model.layers.", ".mixer.in_proj.weight");
        for l in 0..layers {
            let m = format!("model.layers.{l}.mixer");
            let inner2 = out.dim(&format!("{m}.in_proj.weight"), 2, 0)?;
            let hidden = out.dim(&format!("{m}.out_proj.weight"), 2, 0)?;
            for (bias, len) in [
                (format!("{m}.in_proj.bias"), inner2),
                (format!("{m}.out_proj.bias"), hidden),
                (format!("{m}.conv1d.bias"), inner2 / 2),
            ] {
                out.tensors.entry(bias).or_insert_with(|| FileTensor {
                    shape: vec![len],
                    data: vec![0.0; len],
                });
            }
        }
        Ok(out)
    }
}

/// The model and layout of a model file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// lmzip's Mamba-1 layout (`model.layers.N.mixer.*`).
    Mamba1,
    /// The official Mamba layout (`backbone.*`).
    Mamba1Official,
    /// RWKV-7 (`model.layers.N.attn.*`, `ffn.*`).
    Rwkv7,
}

impl Layout {
    pub fn kind(self) -> ModelKind {
        match self {
            Layout::Mamba1 | Layout::Mamba1Official => ModelKind::Mamba1,
            Layout::Rwkv7 => ModelKind::Rwkv7,
        }
    }
}

/// A model file as a run starts from it.
#[derive(Clone, Debug)]
pub struct Weights {
    pub file: ModelFile,
    /// SHA-256 of the file's bytes.
    pub sha256: [u8; 32],
    /// The file's name (without its folder), for messages and headers.
    pub name: Option<String>,
}

impl Weights {
    /// Reads and hashes a model file through one memory map.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path)
            .with_context(|| format!("cannot open model file {}", path.display()))?;
        let len = file.metadata()?.len();
        if len > MAX_FILE {
            bail!(
                "model file {} is larger than {MAX_FILE} bytes",
                path.display()
            );
        }
        // SAFETY: the map is read-only and dropped before this function returns; a file changed
        // underneath by another process can only give wrong values or a wrong hash, which the
        // decoder's hash check (or the model's shape checks) then catch.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .with_context(|| format!("cannot map model file {}", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| !n.is_empty());
        Self::from_bytes(&map, name).with_context(|| format!("model file {}", path.display()))
    }

    /// Parses and hashes model-file bytes.
    pub fn from_bytes(bytes: &[u8], name: Option<String>) -> Result<Self> {
        Ok(Weights {
            file: ModelFile::from_bytes(bytes)?,
            sha256: Sha256::digest(bytes).into(),
            name,
        })
    }

    /// The recipe base that starts from this file.
    pub fn base(&self) -> Result<Base> {
        Ok(Base::File {
            config: self.file.config()?,
            sha256: self.sha256,
            name: self.name.clone(),
        })
    }
}

/// A stream that starts from a model file met the wrong file, or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WeightsError {
    /// The stream needs a model file and none was given.
    Missing {
        sha256: [u8; 32],
        name: Option<String>,
    },
    /// The given file is not the one the stream needs.
    Wrong {
        expected: [u8; 32],
        name: Option<String>,
        actual: [u8; 32],
    },
}

fn called(name: &Option<String>) -> String {
    name.as_ref()
        .map_or(String::new(), |n| format!(", last seen as {n}"))
}

impl fmt::Display for WeightsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WeightsError::Missing { sha256, name } => write!(
                f,
                "this stream starts from a model file (SHA-256 {}{}); give it with --weights FILE",
                hex(sha256),
                called(name)
            ),
            WeightsError::Wrong {
                expected,
                name,
                actual,
            } => write!(
                f,
                "wrong model file: this stream needs the one with SHA-256 {}{}, but the file \
                 given has SHA-256 {}",
                hex(expected),
                called(name),
                hex(actual)
            ),
        }
    }
}

impl std::error::Error for WeightsError {}

/// Widens F32, F16 or BF16 little-endian bytes to f32 (exact for all three).
fn widen(dtype: Dtype, bytes: &[u8]) -> Result<Vec<f32>> {
    Ok(match dtype {
        Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect(),
        Dtype::F16 => bytes
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes(b.try_into().unwrap()).to_f32())
            .collect(),
        Dtype::BF16 => bytes
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes(b.try_into().unwrap()).to_f32())
            .collect(),
        other => bail!("unsupported tensor type {other:?} (lmzip reads F32, F16 and BF16)"),
    })
}

/// Builds the network a native-layout file holds: its sizes read off the shapes, its layout
/// registered, `extra` tensors (name, shape, group: the output bias, say) added after it, and
/// every tensor filled by name ([`fill_params`]); an extra tensor the file lacks stays zero.
pub fn load<N: Build>(
    file: &ModelFile,
    extra: &[(&str, &[usize], Group)],
) -> Result<(N, ParamSet)> {
    let (net, mut params) = N::new(N::infer(file)?)?;
    for &(name, shape, group) in extra {
        params.add(name, shape, group);
    }
    let optional: Vec<&str> = extra.iter().map(|e| e.0).collect();
    fill_params(&mut params, file, &optional)?;
    Ok((net, params))
}

/// Fills every tensor of `params` from `file` by name: the one loader of every layout. A tensor
/// named in `optional` (the output bias of a saved predictor, say) keeps its value when the
/// file lacks it; every other tensor must be in the file with the same shape, and the file may
/// hold nothing else but resume data.
pub fn fill_params(params: &mut ParamSet, file: &ModelFile, optional: &[&str]) -> Result<()> {
    for info in &params.tensors {
        let Some(t) = file.tensors.get(&info.name) else {
            if optional.contains(&info.name.as_str()) {
                continue;
            }
            bail!("model file lacks tensor {}", info.name);
        };
        if t.shape != info.shape {
            bail!(
                "tensor {} has shape {:?} in the model file, but the model needs {:?}",
                info.name,
                t.shape,
                info.shape
            );
        }
        info.slot.of_mut(&mut params.data).copy_from_slice(&t.data);
    }
    if let Some(extra) = file
        .tensors
        .keys()
        .find(|k| !k.starts_with(RESUME_PREFIX) && params.find(k).is_none())
    {
        bail!("model file has tensor {extra}, which this model does not have");
    }
    Ok(())
}

/// Serialises parameters (and extra tensors such as optimizer moments) as F32 safetensors.
///
/// The bytes are a function of the contents alone — header keys sorted, tensor data in name
/// order — so the encoder and the decoder of a stream save byte-identical files (and the same
/// SHA-256). The `safetensors` crate's own writer keeps metadata in a `HashMap`, whose order
/// changes from run to run, hence this writer.
pub fn to_bytes(
    params: &ParamSet,
    extra: &[(String, Vec<usize>, &[f32])],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let mut all: BTreeMap<&str, (&[usize], &[f32])> = BTreeMap::new();
    let tensors = params
        .tensors
        .iter()
        .map(|t| (t.name.as_str(), t.shape.as_slice(), t.slot.of(&params.data)))
        .chain(extra.iter().map(|(n, s, d)| (n.as_str(), s.as_slice(), *d)));
    for (name, shape, data) in tensors {
        if shape.iter().product::<usize>() != data.len() {
            bail!(
                "tensor {name}: shape {shape:?} does not match its {} values",
                data.len()
            );
        }
        if all.insert(name, (shape, data)).is_some() {
            bail!("two tensors are named {name}");
        }
    }
    let mut header = serde_json::Map::new();
    if !metadata.is_empty() {
        header.insert("__metadata__".into(), serde_json::to_value(metadata)?);
    }
    let mut offset = 0usize;
    for (name, (shape, data)) in &all {
        let end = offset + 4 * data.len();
        header.insert(
            (*name).to_string(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, end]}),
        );
        offset = end;
    }
    let mut header = serde_json::to_vec(&serde_json::Value::Object(header))?;
    // The data starts 8-byte aligned, as the format asks; JSON allows trailing spaces.
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + header.len() + offset);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    for (_, data) in all.values() {
        out.extend(data.iter().flat_map(|x| x.to_le_bytes()));
    }
    Ok(out)
}

/// Writes bytes to `path` through a temporary file in the same folder, renamed when complete.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ParamSet {
        let mut p = ParamSet::new();
        let a = p.add("a.weight", &[2, 3], 0);
        let b = p.add("b", &[4], 1);
        p.get_mut(a)
            .copy_from_slice(&[1.0, -2.5, 3.25, 1e-30, f32::MAX, -0.0]);
        p.get_mut(b).copy_from_slice(&[0.1, 0.2, 0.3, 0.4]);
        p
    }

    fn empty_like(p: &ParamSet) -> ParamSet {
        let mut q = ParamSet::new();
        for t in &p.tensors {
            q.add(t.name.clone(), &t.shape, t.group);
        }
        q
    }

    #[test]
    fn saved_parameters_load_back_bit_identically() {
        let p = sample();
        let meta = BTreeMap::from([("recipe".to_string(), "x".to_string())]);
        let bytes = to_bytes(&p, &[], &meta).unwrap();
        let file = ModelFile::from_bytes(&bytes).unwrap();
        assert_eq!(file.metadata, meta);
        let mut q = empty_like(&p);
        fill_params(&mut q, &file, &[]).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&q.data), bits(&p.data));
    }

    #[test]
    fn saved_bytes_depend_on_the_contents_alone() {
        let p = sample();
        let meta: BTreeMap<String, String> = (0..20)
            .map(|i| (format!("key{i}"), format!("value{i}")))
            .collect();
        let extra = [("z.extra".to_string(), vec![2], &[5.0f32, 6.0][..])];
        let a = to_bytes(&p, &extra, &meta).unwrap();
        assert_eq!(a, to_bytes(&p, &extra, &meta).unwrap());
        // What the crate reads back.
        let file = ModelFile::from_bytes(&a).unwrap();
        assert_eq!(file.metadata, meta);
        assert_eq!(file.tensors["z.extra"].data, vec![5.0, 6.0]);
        assert_eq!(file.tensors["a.weight"].shape, vec![2, 3]);
    }

    #[test]
    fn half_precision_tensors_widen_exactly() {
        let h: Vec<u8> = [1.5f32, -0.25, 65504.0]
            .iter()
            .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
            .collect();
        assert_eq!(widen(Dtype::F16, &h).unwrap(), vec![1.5, -0.25, 65504.0]);
        let b: Vec<u8> = [1.5f32, -3.0e38]
            .iter()
            .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
            .collect();
        let w = widen(Dtype::BF16, &b).unwrap();
        assert_eq!(w[0], 1.5);
        assert_eq!(w[1], half::bf16::from_f32(-3.0e38).to_f32());
        assert!(widen(Dtype::I64, &[0; 8]).is_err());
    }

    #[test]
    fn missing_extra_and_misshapen_tensors_are_named() {
        let p = sample();
        let bytes = to_bytes(&p, &[], &BTreeMap::new()).unwrap();
        let file = ModelFile::from_bytes(&bytes).unwrap();

        let mut wider = ParamSet::new();
        wider.add("a.weight", &[3, 2], 0);
        wider.add("b", &[4], 1);
        let err = fill_params(&mut wider, &file, &[]).unwrap_err().to_string();
        assert!(err.contains("a.weight") && err.contains("[2, 3]"), "{err}");

        let mut more = empty_like(&p);
        more.add("c", &[1], 0);
        let err = fill_params(&mut more, &file, &[]).unwrap_err().to_string();
        assert!(err.contains("lacks tensor c"), "{err}");

        let mut fewer = ParamSet::new();
        fewer.add("a.weight", &[2, 3], 0);
        let err = fill_params(&mut fewer, &file, &[]).unwrap_err().to_string();
        assert!(err.contains("has tensor b"), "{err}");
        // An optional tensor is filled when the file has it and kept when it does not.
        let mut optional = ParamSet::new();
        optional.add("a.weight", &[2, 3], 0);
        optional.add("b", &[4], 1);
        fill_params(&mut optional, &file, &["b"]).unwrap();
        assert_eq!(optional.data[6..], [0.1, 0.2, 0.3, 0.4]);
        let mut kept = ParamSet::new();
        kept.add("a.weight", &[2, 3], 0);
        kept.add("b", &[4], 1);
        kept.add("bias", &[2], 2);
        kept.data[10..].copy_from_slice(&[7.0, 8.0]);
        fill_params(&mut kept, &file, &["bias"]).unwrap();
        assert_eq!(kept.data[10..], [7.0, 8.0]);
        let err = fill_params(&mut kept, &file, &[]).unwrap_err().to_string();
        assert!(err.contains("lacks tensor bias"), "{err}");

        assert!(ModelFile::from_bytes(b"not a model").is_err());
    }
}
