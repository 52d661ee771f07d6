//! `garage_model`: the tables of the metadata model.
