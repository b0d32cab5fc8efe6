//! The Kubernetes client `kuota serve` uses, limited to `clientConnection.qps`/`burst`.
//!
//! kube-rs has no client-side rate limiter (client-go's token bucket is what Kueue's
//! `clientConnection` configures), so a tower layer puts a governor token bucket in front
//! of the client's stack: a request waits for a token in `poll_ready`, before it is sent.
//! Watches take one token when they (re)start, as in client-go.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use kube::client::ClientBuilder;
use tower::{Layer, Service};

use super::ClientLimits;

/// Builds a client from the ambient configuration (in-cluster or kubeconfig), rate-limited.
pub async fn client(limits: ClientLimits) -> Result<kube::Client, kube::Error> {
    let config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    client_from_config(config, limits)
}

/// Builds a rate-limited client from an explicit configuration.
pub fn client_from_config(
    config: kube::Config,
    limits: ClientLimits,
) -> Result<kube::Client, kube::Error> {
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&RateLimitLayer::new(limits))
        // The authorizer's refusals: logged, counted and failing /readyz.
        .with_layer(&crate::telemetry::forbidden::Forbidden::process().layer())
        .build())
}

/// A tower layer that admits requests at `qps` per second with bursts of `burst`.
#[derive(Clone)]
pub struct RateLimitLayer {
    limiter: Arc<DefaultDirectRateLimiter>,
}

impl RateLimitLayer {
    /// One token bucket shared by every service this layer wraps.
    pub fn new(limits: ClientLimits) -> Self {
        let period = Duration::from_secs_f64(1.0 / f64::from(limits.qps.max(f32::MIN_POSITIVE)));
        let burst = NonZeroU32::new(limits.burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(period)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
            .allow_burst(burst);
        Self {
            limiter: Arc::new(RateLimiter::direct(quota)),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            limiter: self.limiter.clone(),
            waiting: None,
            permit: false,
        }
    }
}

type Wait = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A service that holds each request until the shared token bucket has a token.
pub struct RateLimited<S> {
    inner: S,
    limiter: Arc<DefaultDirectRateLimiter>,
    /// The wait for the next token, while one is under way.
    waiting: Option<Wait>,
    /// A token was taken for the next `call`.
    permit: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permit {
            let limiter = &self.limiter;
            let wait = self.waiting.get_or_insert_with(|| {
                let limiter = limiter.clone();
                Box::pin(async move { limiter.until_ready().await })
            });
            ready!(wait.as_mut().poll(cx));
            self.waiting = None;
            self.permit = true;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        self.permit = false;
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use tower::ServiceExt;

    fn echo() -> impl Service<u32, Response = u32, Error = Infallible> {
        tower::service_fn(|x: u32| async move { Ok::<_, Infallible>(x) })
    }

    #[tokio::test]
    async fn burst_passes_then_requests_wait_for_tokens() {
        // One token a minute: after the burst of 3, the fourth request cannot be ready.
        let layer = RateLimitLayer::new(ClientLimits {
            qps: 1.0 / 60.0,
            burst: 3,
        });
        let mut svc = layer.layer(echo());
        for i in 0..3 {
            assert_eq!(svc.ready().await.unwrap().call(i).await.unwrap(), i);
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(svc.poll_ready(&mut cx).is_pending(), "the burst is spent");
    }

    #[tokio::test]
    async fn services_of_one_layer_share_the_bucket() {
        let layer = RateLimitLayer::new(ClientLimits {
            qps: 1.0 / 60.0,
            burst: 2,
        });
        let mut a = layer.layer(echo());
        let mut b = layer.layer(echo());
        a.ready().await.unwrap().call(1).await.unwrap();
        b.ready().await.unwrap().call(2).await.unwrap();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(a.poll_ready(&mut cx).is_pending());
        assert!(b.poll_ready(&mut cx).is_pending());
    }

    #[tokio::test]
    async fn a_ready_token_is_not_spent_twice() {
        let layer = RateLimitLayer::new(ClientLimits {
            qps: 1.0 / 60.0,
            burst: 1,
        });
        let mut svc = layer.layer(echo());
        let mut cx = Context::from_waker(std::task::Waker::noop());
        // Polling ready twice before calling keeps the one token for that call.
        assert!(svc.poll_ready(&mut cx).is_ready());
        assert!(svc.poll_ready(&mut cx).is_ready());
        assert_eq!(svc.call(7).await.unwrap(), 7);
        assert!(svc.poll_ready(&mut cx).is_pending());
    }
}
