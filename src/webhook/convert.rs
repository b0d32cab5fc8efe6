//! `POST /convert`: the CRDs' conversion webhook (ConversionReview v1). Decoding and encoding
//! only; the conversion itself is `crds::convert`.

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use kube::core::Status;
use kube::core::conversion::{
    ConversionRequest, ConversionResponse, ConversionReview, ConvertConversionReviewError,
};

use crate::crds::convert;

pub use crate::crds::CONVERT_PATH;

/// Why a request body is not a ConversionReview we can answer.
#[derive(Debug, thiserror::Error)]
pub enum ReviewBodyError {
    #[error("the body is not a ConversionReview: {0}")]
    NotAReview(#[source] serde_json::Error),
    #[error("the ConversionReview has no request")]
    NoRequest(#[source] ConvertConversionReviewError),
}

/// Answers one ConversionReview body. A body that is not a ConversionReview with a request
/// gets HTTP 400 and a failed review saying why; an object that does not convert fails the
/// whole review (the API server accepts nothing partial) with a message naming the object
/// and the field.
pub fn handle(body: &[u8]) -> (StatusCode, ConversionReview) {
    let request = serde_json::from_slice::<ConversionReview>(body)
        .map_err(ReviewBodyError::NotAReview)
        .and_then(|review| {
            ConversionRequest::from_review(review).map_err(ReviewBodyError::NoRequest)
        });
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            let status = Status::failure(&e.to_string(), "BadRequest").with_code(400);
            return (
                StatusCode::BAD_REQUEST,
                ConversionResponse::invalid(status).into_review(),
            );
        }
    };
    let desired = request.desired_api_version.clone();
    let result = convert::convert_all(&request.objects, &desired);
    let response = ConversionResponse::for_request(request);
    let response = match result {
        Ok(objects) => response.success(objects),
        Err(e) => {
            tracing::warn!(error = %e, desired, "conversion failed");
            response.failure(Status::failure(
                &format!("converting to {desired}: {e}"),
                "Invalid",
            ))
        }
    };
    (StatusCode::OK, response.into_review())
}

/// The axum handler for [`CONVERT_PATH`].
pub async fn serve(body: Bytes) -> Response {
    let (code, review) = handle(&body);
    match serde_json::to_vec(&review) {
        Ok(bytes) => (code, [(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
