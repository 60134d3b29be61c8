//! `lab noise`: the lab's own noise floor per device model and metric, from the store's
//! baseline and A/A arms (`build_noise`), as a table or JSON (`render`).

pub(super) mod build_noise;
pub(super) mod render;
