//! reactor (work in progress)
pub mod epoll;
pub mod sys;
