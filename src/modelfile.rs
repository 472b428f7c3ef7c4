//! Model files: safetensors, read through a memory map with F32, F16 and BF16 tensors (the two
//! half formats widened exactly to f32), written as F32 with the tensor names of the model
//! layouts.
//!
//! A model builds its parameter registry from a configuration; loading a file means inferring
//! that configuration from the tensor shapes (each model knows how), building the registry, and
//! filling every tensor by name with [`fill_params`], which refuses missing, extra or misshapen
//! tensors with a message that names them.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};
use safetensors::{Dtype, SafeTensors};

use crate::params::{Group, ParamSet};

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

impl ModelFile {
    /// Reads a safetensors file.
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
        // underneath by another process can only give wrong values, which the caller's hash check
        // (or the model's shape checks) then catch.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .with_context(|| format!("cannot map model file {}", path.display()))?;
        Self::from_bytes(&map).with_context(|| format!("model file {}", path.display()))
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

    /// The shape of a tensor, or an error naming it.
    pub fn shape(&self, name: &str) -> Result<&[usize]> {
        self.tensors
            .get(name)
            .map(|t| t.shape.as_slice())
            .with_context(|| format!("model file lacks tensor {name}"))
    }

    /// Dimension `axis` of a tensor of the given rank.
    pub fn dim(&self, name: &str, rank: usize, axis: usize) -> Result<usize> {
        let shape = self.shape(name)?;
        if shape.len() != rank {
            bail!("tensor {name} has shape {shape:?}, expected rank {rank}");
        }
        Ok(shape[axis])
    }

    /// Number of blocks: the count of consecutive `prefix{N}suffix` tensors from N = 0.
    pub fn count_layers(&self, prefix: &str, suffix: &str) -> usize {
        (0..)
            .take_while(|n| self.tensors.contains_key(&format!("{prefix}{n}{suffix}")))
            .count()
    }
}

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

/// Fills every tensor of `params` from `file` by name. Tensors of the file that `params` lacks
/// are refused, except `optional` ones, which are added to `params` in the given group when
/// present (the output bias of a saved predictor, say).
pub fn fill_params(
    params: &mut ParamSet,
    file: &ModelFile,
    optional: &[(&str, Group)],
) -> Result<()> {
    for &(name, group) in optional {
        if let Some(t) = file.tensors.get(name)
            && params.find(name).is_none()
        {
            params.add(name, &t.shape, group);
        }
    }
    for info in &params.tensors {
        let t = file
            .tensors
            .get(&info.name)
            .with_context(|| format!("model file lacks tensor {}", info.name))?;
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
    if let Some(extra) = file.tensors.keys().find(|k| params.find(k).is_none()) {
        bail!("model file has tensor {extra}, which this model does not have");
    }
    Ok(())
}

/// Serialises parameters (and extra tensors such as optimizer moments) as F32 safetensors.
pub fn to_bytes(
    params: &ParamSet,
    extra: &[(String, Vec<usize>, &[f32])],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let mut owned: Vec<(String, Vec<usize>, Vec<u8>)> = params
        .tensors
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                t.shape.clone(),
                le_bytes(t.slot.of(&params.data)),
            )
        })
        .collect();
    owned.extend(
        extra
            .iter()
            .map(|(n, s, d)| (n.clone(), s.clone(), le_bytes(d))),
    );
    let views = owned
        .iter()
        .map(|(n, s, b)| {
            Ok((
                n.clone(),
                safetensors::tensor::TensorView::new(Dtype::F32, s.clone(), b)?,
            ))
        })
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let meta: HashMap<String, String> = metadata.clone().into_iter().collect();
    safetensors::serialize(views, Some(meta)).map_err(|e| anyhow::anyhow!("{e}"))
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

fn le_bytes(data: &[f32]) -> Vec<u8> {
    data.iter().flat_map(|x| x.to_le_bytes()).collect()
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
        let mut optional = ParamSet::new();
        optional.add("a.weight", &[2, 3], 0);
        fill_params(&mut optional, &file, &[("b", 1)]).unwrap();
        assert_eq!(optional.data[6..], [0.1, 0.2, 0.3, 0.4]);

        assert!(ModelFile::from_bytes(b"not a model").is_err());
    }
}
