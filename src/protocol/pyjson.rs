//! JSON values to and from Python objects without JSON text: what `json.loads` would make of
//! a value, and the JSON a Python value stands for (errors name what cannot be JSON).

use std::borrow::Cow;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyList, PyString};
use pyo3::IntoPyObjectExt;
use serde_json::Value;

/// A JSON value as the Python object `json.loads` would make of it.
pub fn json_into_py<'py>(value: Cow<'_, Value>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    fn convert<'py>(value: &Value, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match value {
            Value::Null => py.None().into_bound(py),
            Value::Bool(b) => b.into_bound_py_any(py)?,
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => i.into_bound_py_any(py)?,
                (None, Some(u)) => u.into_bound_py_any(py)?,
                _ => PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any(),
            },
            Value::String(s) => PyString::new(py, s).into_any(),
            Value::Array(items) => {
                let list = PyList::empty(py);
                for item in items {
                    list.append(convert(item, py)?)?;
                }
                list.into_any()
            }
            Value::Object(map) => {
                let dict = PyDict::new(py);
                for (key, item) in map {
                    dict.set_item(key, convert(item, py)?)?;
                }
                dict.into_any()
            }
        })
    }
    convert(&value, py)
}

/// A Python value as JSON: `None`, `bool`, `int`, `float`, `str`, lists and tuples, and dicts
/// with `str` keys; anything else (or a number JSON cannot hold) is a `TypeError` or
/// `ValueError` that names it.
pub fn json_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    use pyo3::exceptions::PyTypeError;
    use pyo3::types::{PyBool, PyInt, PyTuple};
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        return obj.extract::<u64>().map(Value::from).map_err(|_| {
            PyValueError::new_err(format!("the integer {obj} is too large for JSON"))
        });
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return serde_json::Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err(format!("{obj} is not a JSON number")));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_string()));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        return obj
            .try_iter()?
            .map(|item| json_from_py(&item?))
            .collect::<PyResult<Vec<Value>>>()
            .map(Value::Array);
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let mut map = serde_json::Map::new();
        for (key, value) in dict.iter() {
            let key = key.cast::<PyString>().map_err(|_| {
                PyTypeError::new_err(format!("dict keys must be str for JSON, not {key:?}"))
            })?;
            map.insert(key.to_str()?.to_string(), json_from_py(&value)?);
        }
        return Ok(Value::Object(map));
    }
    Err(PyTypeError::new_err(format!(
        "{} is not a JSON value (use str, int, float, bool, None, lists and dicts)",
        obj.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    )))
}
